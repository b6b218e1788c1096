// MLA decode on AVX-512 BF16: both products of every page on vdpbf16ps (or, in the variant for
// cores whose FMA pipes outrun it, as f32 FMAs on operands widened to f32 once: q into two
// planes per sequence, the page's key rows as they arrive, P as it is written), lanes over
// query rows.
//
// Scores S^T[t][m] = sum_p K[t] pair p . Q[m] pair p. The key row is used as it sits in the page:
// each (k[2p], k[2p+1]) pair is one 32-bit broadcast; q is packed once per sequence into
// [pair][row] so that one load gives the same pair of 16 rows. Lanes over rows make the online
// softmax vertical (max, exp, sums per lane, no horizontal reductions).
// Output O[m][c] += sum_t P[m][t] V[t][c]: lanes over the 512 value columns, P broadcast as
// (p[t], p[t+1]) pairs, V interleaved once per page into (v[t][c], v[t+1][c]) pairs. The value
// rows are the key rows' first 512 dims, so each page is read from memory once.
// FP8 pages: the e4m3 codes are widened to bf16 without their scales (exact, by the library's
// bulk converter); the per-token group scales are applied to the scores after each 128-wide
// group and folded into P for the products with each group's 128 value columns.
#include "kernels/x86/avx512/mla_chunk_avx512.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "kernels/convert.h"
#include "kernels/x86/avx512/vec16_avx512.h"
#include "kernels/x86/mla_rows.h"

namespace sol::kernels {
namespace {

constexpr int kPairs = kMlaDk / 2;          // 288 (k, k+1) pairs per key row
constexpr int kLatentPairs = kMlaDv / 2;    // 256
constexpr int kGroupPairs = 64;             // one FP8 scale group: 128 dims
constexpr int kBf16Row = 2 * kMlaDk;        // 1152 bytes per bf16 token
constexpr int kFp8Row = 656;
constexpr int kFp8Scales = 512, kFp8Rope = 528;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Scratch carved out of MlaChunk::scratch (sizes in mla_scratch_bytes).
struct Scratch {
  uint32_t* qt;      // [288][mp] q pairs; FMA: [288][2][mp] their first and second values, f32
  float* s;          // [64][mp] scores, then probabilities
  uint32_t* p2;      // [4][32][mp] probability pairs (one set per FP8 scale group); FMA: [4][32][2][mp] f32
  uint32_t* v2;      // [32][512] value pairs
  uint16_t* kb;      // [64][512] FP8 latent rows widened to bf16
  float* kf;         // FMA: [64][576] the page's key rows widened to f32 (FP8: without scales)
  int32_t* visible;  // [mp] cache positions each row sees
  float* corr;       // [mp] rescale of O for the current page
  float* mx;         // [mp] running max
  float* sum;        // [mp] running sum
  Scratch(void* base, int64_t mp) {
    char* p = static_cast<char*>(base);
    auto take = [&](int64_t bytes) {
      char* r = p;
      p += (bytes + 63) / 64 * 64;
      return r;
    };
    qt = reinterpret_cast<uint32_t*>(take(mp * 8 * kPairs));
    s = reinterpret_cast<float*>(take(mp * 4 * kMlaPage));
    p2 = reinterpret_cast<uint32_t*>(take(mp * 8 * (kMlaPage / 2) * 4));
    v2 = reinterpret_cast<uint32_t*>(take(int64_t(kMlaPage / 2) * kMlaDv * 4));
    kb = reinterpret_cast<uint16_t*>(take(int64_t(kMlaPage) * kMlaDv * 2));
    kf = reinterpret_cast<float*>(take(int64_t(kMlaPage) * kMlaDk * 4));
    visible = reinterpret_cast<int32_t*>(take(mp * 4));
    corr = reinterpret_cast<float*>(take(mp * 4));
    mx = reinterpret_cast<float*>(take(mp * 4));
    sum = reinterpret_cast<float*>(take(mp * 4));
  }
};

const uint16_t* q_row(const MlaChunk& c, int64_t m) {
  return c.q + (m / c.heads) * c.q_stride_s + (m % c.heads) * c.q_stride_h;
}

// qt[p][m] = (q[m][2p], q[m][2p+1]); rows beyond the last are zero. 16 rows at a time by gather
// when their offsets fit in 32 bits (any ordinary layout), else element by element. kFma: the
// pair's values widened, qt[p][0][m] = q[m][2p] and qt[p][1][m] = q[m][2p+1] as f32.
template <bool kFma>
void pack_q(const MlaChunk& c, const Scratch& sc, int64_t rows, int64_t mp) {
  const auto put = [&](int64_t p, int64_t m0, __m512i pairs) {
    if constexpr (kFma) {
      _mm512_store_ps(reinterpret_cast<float*>(sc.qt) + p * 2 * mp + m0, bf16_low_f32(pairs));
      _mm512_store_ps(reinterpret_cast<float*>(sc.qt) + p * 2 * mp + mp + m0, bf16_high_f32(pairs));
    } else {
      _mm512_store_si512(sc.qt + p * mp + m0, pairs);
    }
  };
  const char* base = reinterpret_cast<const char*>(c.q);
  for (int64_t m0 = 0; m0 < mp; m0 += 16) {
    alignas(64) int32_t offset[16];
    bool fits = true;
    for (int r = 0; r < 16; ++r) {
      const int64_t off = m0 + r < rows ? reinterpret_cast<const char*>(q_row(c, m0 + r)) - base : 0;
      fits &= off >= 0 && off <= INT32_MAX - 4 * kPairs;
      offset[r] = int32_t(off);
    }
    const __mmask16 live = tail_mask(rows - m0);
    if (fits) {
      const __m512i idx = _mm512_load_si512(offset);
      for (int p = 0; p < kPairs; ++p)
        put(p, m0, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, idx, base + 4 * p, 1));
    } else {
      for (int p = 0; p < kPairs; ++p) {
        alignas(64) uint32_t v[16] = {};
        for (int r = 0; r < 16; ++r)
          if (m0 + r < rows) std::memcpy(&v[r], q_row(c, m0 + r) + 2 * p, 4);
        put(p, m0, _mm512_load_si512(v));
      }
    }
  }
}

// Lines of the next page still to prefetch: one line per pair step of the score tiles, so the
// page streams into L2 while this one is computed (a cold page read by 16 strided broadcasts
// at a time otherwise waits on DRAM latency).
struct Prefetch {
  const char* next = nullptr;
  const char* end = nullptr;
  [[gnu::always_inline]] void step() {
    if (next < end) {
      _mm_prefetch(next, _MM_HINT_T1);
      next += 64;
    }
  }
};

// How a score tile meets the scores already stored.
enum class Into { store, scaled_store, scaled_add, add };

// TR tokens x MV row vectors of S^T over `npairs` pairs. k: token 0's first pair (tokens
// kStride bytes apart); qt: first pair of the first row vector; scale: token 0's FP8 scale.
// kFma: each pair as two f32 FMAs (first values, then second), for cores whose FMA pipes
// outrun vdpbf16ps (kPrefersFmaBf16): k is then the page's rows widened to f32 (8 bytes a
// pair, broadcast from memory) and qt the two f32 planes of q, so no operand is widened here.
template <int TR, int MV, int kStride, Into kInto, bool kFma>
[[gnu::always_inline]] inline void qk_tile(const uint8_t* k, const uint32_t* qt, int64_t mp, int npairs, float* s,
                                           const uint8_t* scale, Prefetch& pf) {
  __m512 acc[TR][MV];
  for (int t = 0; t < TR; ++t)
    for (int j = 0; j < MV; ++j) acc[t][j] = _mm512_setzero_ps();
  for (int p = 0; p < npairs; ++p) {
    if constexpr (kFma) {
      __m512 q0[MV], q1[MV];
      const float* qf = reinterpret_cast<const float*>(qt);
      for (int j = 0; j < MV; ++j) q0[j] = _mm512_load_ps(qf + 16 * j), q1[j] = _mm512_load_ps(qf + mp + 16 * j);
#pragma GCC unroll 16
      for (int t = 0; t < TR; ++t) {
        const float* kt = reinterpret_cast<const float*>(k + t * kStride);
        const __m512 k0 = _mm512_set1_ps(kt[0]), k1 = _mm512_set1_ps(kt[1]);
        for (int j = 0; j < MV; ++j) acc[t][j] = _mm512_fmadd_ps(k1, q1[j], _mm512_fmadd_ps(k0, q0[j], acc[t][j]));
      }
    } else {
      __m512i qv[MV];
      for (int j = 0; j < MV; ++j) qv[j] = _mm512_load_si512(qt + 16 * j);
#pragma GCC unroll 16
      for (int t = 0; t < TR; ++t) {
        int32_t pair;
        std::memcpy(&pair, k + t * kStride, 4);
        const __m512bh kk = (__m512bh)_mm512_set1_epi32(pair);
        for (int j = 0; j < MV; ++j) acc[t][j] = _mm512_dpbf16_ps(acc[t][j], kk, (__m512bh)qv[j]);
      }
    }
    k += kFma ? 8 : 4;
    qt += kFma ? 2 * mp : mp;
    pf.step();
  }
  for (int t = 0; t < TR; ++t) {
    float* row = s + t * mp;
    __m512 g = _mm512_setzero_ps();
    if constexpr (kInto == Into::scaled_store || kInto == Into::scaled_add) {
      float f;
      std::memcpy(&f, scale + t * kFp8Row, 4);
      g = _mm512_set1_ps(f);
    }
    for (int j = 0; j < MV; ++j) {
      float* out = row + 16 * j;
      if constexpr (kInto == Into::store) _mm512_store_ps(out, acc[t][j]);
      else if constexpr (kInto == Into::scaled_store) _mm512_store_ps(out, _mm512_mul_ps(acc[t][j], g));
      else if constexpr (kInto == Into::scaled_add) _mm512_store_ps(out, _mm512_fmadd_ps(acc[t][j], g, _mm512_load_ps(out)));
      else _mm512_store_ps(out, _mm512_add_ps(acc[t][j], _mm512_load_ps(out)));
    }
  }
}

// Token tile height per row-vector count: TR * MV accumulators (16..24) hide vdpbf16ps latency,
// and TR divides the 64 tokens of a page.
template <int MV> constexpr int kTileTokens = MV == 1 ? 16 : MV == 4 ? 4 : 8;

template <int MV, int kStride, Into kInto, bool kFma>
void qk_rows(const uint8_t* k, const uint32_t* qt, int64_t mp, int npairs, float* s, const uint8_t* scale,
             int tokens, Prefetch& pf) {
  constexpr int TR = kTileTokens<MV>;
  for (int t0 = 0; t0 < tokens; t0 += TR)
    qk_tile<TR, MV, kStride, kInto, kFma>(k + t0 * kStride, qt, mp, npairs, s + t0 * mp, scale + t0 * kFp8Row, pf);
}

// Scores of `tokens` tokens (rounded up to the tile) for all row vectors.
template <int kStride, Into kInto, bool kFma>
void qk_pass(const uint8_t* k, const uint32_t* qt, int64_t mp, int npairs, float* s, const uint8_t* scale,
             int tokens, Prefetch& pf) {
  for (int64_t m0 = 0; m0 < mp; m0 += 64) {
    const int mv = int(std::min<int64_t>(4, (mp - m0) / 16));
    const uint32_t* q = qt + m0;
    float* sm = s + m0;
    switch (mv) {
      case 1: qk_rows<1, kStride, kInto, kFma>(k, q, mp, npairs, sm, scale, tokens, pf); break;
      case 2: qk_rows<2, kStride, kInto, kFma>(k, q, mp, npairs, sm, scale, tokens, pf); break;
      case 3: qk_rows<3, kStride, kInto, kFma>(k, q, mp, npairs, sm, scale, tokens, pf); break;
      default: qk_rows<4, kStride, kInto, kFma>(k, q, mp, npairs, sm, scale, tokens, pf); break;
    }
  }
}

// Online softmax over one page, per lane (row): masks positions the row does not see (and
// tokens >= n_hi) to probability 0, updates max / sum, leaves p in sc.s and the rescale of
// O in sc.corr. NaN scores give NaN probabilities (the max need not carry them).
void softmax_page(const Scratch& sc, int64_t mp, int64_t pos, int n_hi, float scale) {
  const __m512 vscale = _mm512_set1_ps(scale), neg_inf = _mm512_set1_ps(kNegInf);
  for (int64_t m0 = 0; m0 < mp; m0 += 16) {
    const __m512i visible = _mm512_load_si512(sc.visible + m0);
    __m512 page_max = neg_inf;
    for (int t = 0; t < kMlaPage; ++t) {
      float* st = sc.s + t * mp + m0;
      const __mmask16 seen = t < n_hi ? _mm512_cmpgt_epi32_mask(visible, _mm512_set1_epi32(int32_t(pos + t))) : 0;
      const __m512 v = _mm512_mask_mul_ps(neg_inf, seen, _mm512_load_ps(st), vscale);
      _mm512_store_ps(st, v);
      page_max = _mm512_max_ps(page_max, v);
    }
    const __m512 old_max = _mm512_load_ps(sc.mx + m0);
    const __m512 new_max = _mm512_max_ps(old_max, page_max);
    // A row that has seen nothing keeps -inf; subtracting 0 then keeps its p at exactly 0.
    const __m512 shift = _mm512_mask_mov_ps(new_max, _mm512_cmp_ps_mask(new_max, neg_inf, _CMP_EQ_OQ), _mm512_setzero_ps());
    const __m512 corr = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(old_max, neg_inf, _CMP_NEQ_UQ),
                                            exp16(_mm512_sub_ps(old_max, shift)));
    __m512 page_sum = _mm512_setzero_ps();
    for (int t = 0; t < kMlaPage; ++t) {
      float* st = sc.s + t * mp + m0;
      const __m512 v = _mm512_load_ps(st);
      const __m512 p = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, neg_inf, _CMP_NEQ_UQ), exp16(_mm512_sub_ps(v, shift)));
      _mm512_store_ps(st, p);
      page_sum = _mm512_add_ps(page_sum, p);
    }
    _mm512_store_ps(sc.corr + m0, corr);
    _mm512_store_ps(sc.mx + m0, new_max);
    _mm512_store_ps(sc.sum + m0, _mm512_fmadd_ps(_mm512_load_ps(sc.sum + m0), corr, page_sum));
  }
}

// p2[g][tp][m] = bf16 pair (p[2tp][m] * scale_g[2tp], p[2tp+1][m] * scale_g[2tp+1]). A token
// >= n_lo pairs with a zero value; its scale (garbage beyond the sequence) is taken as 0.
// kFma: the pair's two bf16 values widened into planes, p2[g][tp][0][m] and p2[g][tp][1][m] f32.
template <bool kFma>
void pack_probabilities(const Scratch& sc, int64_t mp, int npairs, int n_lo, int groups, const uint8_t* page) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                              22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int g = 0; g < groups; ++g) {
    uint32_t* out = sc.p2 + int64_t(g) * (kMlaPage / 2) * mp * (kFma ? 2 : 1);
    for (int tp = 0; tp < npairs; ++tp) {
      __m512 s0 = _mm512_set1_ps(1.0f), s1 = s0;
      if (page) {
        float f0, f1;
        std::memcpy(&f0, page + (2 * tp) * kFp8Row + kFp8Scales + 4 * g, 4);
        f1 = 0;
        if (2 * tp + 1 < n_lo) std::memcpy(&f1, page + (2 * tp + 1) * kFp8Row + kFp8Scales + 4 * g, 4);
        s0 = _mm512_set1_ps(f0);
        s1 = _mm512_set1_ps(f1);
      }
      for (int64_t m0 = 0; m0 < mp; m0 += 16) {
        const __m512 a = _mm512_mul_ps(_mm512_load_ps(sc.s + (2 * tp) * mp + m0), s0);
        const __m512 b = _mm512_mul_ps(_mm512_load_ps(sc.s + (2 * tp + 1) * mp + m0), s1);
        const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(b, a);  // a's 16 bf16, then b's
        if constexpr (kFma) {
          float* plane = reinterpret_cast<float*>(out) + tp * 2 * mp + m0;
          _mm512_store_ps(plane, bf16x16_to_f32(_mm512_castsi512_si256(both)));
          _mm512_store_ps(plane + mp, bf16x16_to_f32(_mm512_extracti64x4_epi64(both, 1)));
        } else {
          _mm512_store_si512(out + tp * mp + m0, _mm512_permutexvar_epi16(interleave, both));
        }
      }
    }
  }
}

// v2[tp][c] = (v[2tp][c], v[2tp+1][c]) for tokens < n_lo; the partner of the last odd token is 0.
void pack_values(const Scratch& sc, const uint8_t* rows, int64_t row_bytes, int n_lo) {
  const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                                      37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
  for (int tp = 0; 2 * tp < n_lo; ++tp) {
    const uint8_t* a = rows + (2 * tp) * row_bytes;
    const uint8_t* b = rows + (2 * tp + 1) * row_bytes;
    const bool has_b = 2 * tp + 1 < n_lo;
    uint32_t* out = sc.v2 + tp * kMlaDv;
    for (int c = 0; c < kMlaDv; c += 32) {
      const __m512i va = _mm512_loadu_si512(a + 2 * c);
      const __m512i vb = has_b ? _mm512_loadu_si512(b + 2 * c) : _mm512_setzero_si512();
      _mm512_store_si512(out + c, _mm512_permutex2var_epi16(va, lo, vb));
      _mm512_store_si512(out + c + 16, _mm512_permutex2var_epi16(va, hi, vb));
    }
  }
}

// A PV tile's accumulators: O rows [0, MR) x 64 columns times the rows' rescale (zero on the
// first page), and back.
template <int MR>
[[gnu::always_inline]] inline void load_pv_tile(__m512 (&acc)[MR][4], const float* o, const float* corr, bool first) {
  for (int r = 0; r < MR; ++r) {
    const __m512 cr = _mm512_set1_ps(corr[r]);
    for (int v = 0; v < 4; ++v)
      acc[r][v] = first ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_loadu_ps(o + r * kMlaDv + 16 * v), cr);
  }
}
template <int MR>
[[gnu::always_inline]] inline void store_pv_tile(const __m512 (&acc)[MR][4], float* o) {
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < 4; ++v) _mm512_storeu_ps(o + r * kMlaDv + 16 * v, acc[r][v]);
}

// O rows [m0, m0 + MR) x 64 columns: O = O * corr + P . V over `npairs` token pairs: vdpbf16ps
// on P's pairs and V's interleaved pairs.
template <int MR>
void pv_tile(const uint32_t* p2, int64_t mp, const uint32_t* v2, int npairs, float* o, const float* corr, bool first) {
  __m512 acc[MR][4];
  load_pv_tile<MR>(acc, o, corr, first);
  for (int tp = 0; tp < npairs; ++tp) {
    __m512i vv[4];
    for (int v = 0; v < 4; ++v) vv[v] = _mm512_load_si512(v2 + 16 * v);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m512bh pr = (__m512bh)_mm512_set1_epi32(int32_t(p2[r]));
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], pr, (__m512bh)vv[v]);
    }
    p2 += mp;
    v2 += kMlaDv;
  }
  store_pv_tile<MR>(acc, o);
}

// The same tile as two f32 FMAs per pair (first values, then second), all operands f32 in
// memory: P's planes (pf[tp][0..1][m]) broadcast, V straight from the page's widened key rows
// (kf, tokens 2tp and 2tp + 1). An odd last token (`half`) has no partner: its pair is one FMA.
template <int MR>
void pv_tile_fma(const float* pf, int64_t mp, const float* kf, int npairs, bool half, float* o, const float* corr,
                 bool first) {
  __m512 acc[MR][4];
  load_pv_tile<MR>(acc, o, corr, first);
  for (int tp = 0; tp < npairs; ++tp) {
    __m512 v0[4], v1[4];
    for (int v = 0; v < 4; ++v) v0[v] = _mm512_loadu_ps(kf + 16 * v), v1[v] = _mm512_loadu_ps(kf + kMlaDk + 16 * v);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m512 p0 = _mm512_set1_ps(pf[r]), p1 = _mm512_set1_ps(pf[mp + r]);
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_fmadd_ps(p1, v1[v], _mm512_fmadd_ps(p0, v0[v], acc[r][v]));
    }
    pf += 2 * mp;
    kf += 2 * kMlaDk;
  }
  if (half) {
    __m512 v0[4];
    for (int v = 0; v < 4; ++v) v0[v] = _mm512_loadu_ps(kf + 16 * v);
    for (int r = 0; r < MR; ++r) {
      const __m512 p0 = _mm512_set1_ps(pf[r]);
      for (int v = 0; v < 4; ++v) acc[r][v] = _mm512_fmadd_ps(p0, v0[v], acc[r][v]);
    }
  }
  store_pv_tile<MR>(acc, o);
}

// Rows per PV tile: MR x 4 accumulators beside the tile's 4 value vectors (vdpbf16ps), or its
// 8 value vectors and P's two broadcasts (FMA), in the 32 registers.
template <bool kFma>
constexpr int kPvRows = kFma ? 5 : 6;

template <int... R>
void pv_rows_dispatch(int mr, const uint32_t* p2, int64_t mp, const uint32_t* v2, int npairs, float* o,
                      const float* corr, bool first, std::integer_sequence<int, R...>) {
  using Fn = void (*)(const uint32_t*, int64_t, const uint32_t*, int, float*, const float*, bool);
  static constexpr Fn table[] = {&pv_tile<R + 1>...};
  table[mr - 1](p2, mp, v2, npairs, o, corr, first);
}

template <int... R>
void pv_rows_dispatch_fma(int mr, const float* pf, int64_t mp, const float* kf, int npairs, bool half, float* o,
                          const float* corr, bool first, std::integer_sequence<int, R...>) {
  using Fn = void (*)(const float*, int64_t, const float*, int, bool, float*, const float*, bool);
  static constexpr Fn table[] = {&pv_tile_fma<R + 1>...};
  table[mr - 1](pf, mp, kf, npairs, half, o, corr, first);
}

// O += P V over the page's first n_lo tokens (pairs; the FMA route's odd last token alone).
template <bool kFma>
void pv_page(const Scratch& sc, int64_t rows, int64_t mp, int n_lo, bool fp8, float* o, bool first) {
  for (int c0 = 0; c0 < kMlaDv; c0 += 64) {
    const int64_t group = fp8 ? c0 / 128 : 0;
    for (int64_t m0 = 0; m0 < rows; m0 += kPvRows<kFma>) {
      const int mr = int(std::min<int64_t>(kPvRows<kFma>, rows - m0));
      if constexpr (kFma) {
        const float* pf = reinterpret_cast<const float*>(sc.p2) + group * (kMlaPage / 2) * 2 * mp + m0;
        pv_rows_dispatch_fma(mr, pf, mp, sc.kf + c0, n_lo / 2, n_lo % 2 != 0, o + m0 * kMlaDv + c0, sc.corr + m0,
                             first, std::make_integer_sequence<int, kPvRows<kFma>>{});
      } else {
        const uint32_t* p2 = sc.p2 + group * (kMlaPage / 2) * mp + m0;
        pv_rows_dispatch(mr, p2, mp, sc.v2 + c0, (n_lo + 1) / 2, o + m0 * kMlaDv + c0, sc.corr + m0, first,
                         std::make_integer_sequence<int, kPvRows<kFma>>{});
      }
    }
  }
}

// Tokens [n_lo, n_hi) are seen by some rows only (causal, s_q > 1): added in f32 to exactly the
// rows that see them, so a NaN there reaches no other row. Values from the bf16 latent rows, or
// (wide, the FMA route) the same values widened to f32.
void tail_tokens(const Scratch& sc, const MlaChunk& c, int64_t rows, int64_t mp, int64_t pos, int n_lo, int n_hi,
                 const uint8_t* latent, int64_t row_bytes, const float* wide, const uint8_t* page, float* o) {
  for (int t = n_lo; t < n_hi; ++t) {
    const uint16_t* v = reinterpret_cast<const uint16_t*>(latent + t * row_bytes);
    const float* vw = wide ? wide + int64_t(t) * kMlaDk : nullptr;
    float group_scale[4] = {1, 1, 1, 1};
    if (c.format == MlaCacheFormat::fp8) std::memcpy(group_scale, page + t * kFp8Row + kFp8Scales, 16);
    for (int64_t m = 0; m < rows; ++m) {
      if (sc.visible[m] <= pos + t) continue;
      const float p = sc.s[t * mp + m];
      for (int d = 0; d < kMlaDv; d += 16) {
        const __m512 x = vw ? _mm512_loadu_ps(vw + d) : load16(v, DType::bf16, d, 0xFFFF);
        const __m512 w = _mm512_set1_ps(p * group_scale[d / 128]);
        _mm512_storeu_ps(o + m * kMlaDv + d, _mm512_fmadd_ps(x, w, _mm512_loadu_ps(o + m * kMlaDv + d)));
      }
    }
  }
}

// The FMA route's key rows: the page's first `tokens` rows widened to f32 (FP8: the codes
// without their scales, which the score groups and P apply; the rope dims are bf16).
void widen_keys(const Scratch& sc, const uint8_t* page, bool fp8, int tokens) {
  for (int t = 0; t < tokens; ++t) {
    float* out = sc.kf + int64_t(t) * kMlaDk;
    if (!fp8) {
      convert_avx512(page + t * kBf16Row, DType::bf16, out, DType::f32, kMlaDk, false, 0);
    } else {
      convert_avx512(page + t * kFp8Row, DType::f8e4m3, out, DType::f32, kMlaDv, false, 0);
      convert_avx512(page + t * kFp8Row + kFp8Rope, DType::bf16, out + kMlaDv, DType::f32, kMlaDk - kMlaDv, false, 0);
    }
  }
}

template <bool kFma>
void chunk(const MlaChunk& c) {
  const int64_t rows = int64_t(c.s_q) * c.heads, mp = mla_rows_padded(rows);
  const Scratch sc(c.scratch, mp);
  const bool fp8 = c.format == MlaCacheFormat::fp8;
  if (!c.q_packed) pack_q<kFma>(c, sc, rows, mp);
  // Elements of one pair step of q (its planes) and bytes of a key row, per route.
  const int64_t q_step = kFma ? 2 * mp : mp;
  constexpr int kKeyRow = kMlaDk * 4;

  int64_t vis_min = c.seqlen, vis_max = 0;
  for (int64_t m = 0; m < mp; ++m) {
    const int64_t i = m < rows ? m / c.heads : c.s_q - 1;
    const int64_t v = c.seqlen - (c.causal ? c.s_q - 1 - i : 0);
    sc.visible[m] = int32_t(std::max<int64_t>(v, 0));
    if (m < rows) vis_min = std::min(vis_min, v), vis_max = std::max(vis_max, v);
    sc.mx[m] = kNegInf;
    sc.sum[m] = 0;
  }

  for (int j = 0; j < c.npages; ++j) {
    const uint8_t* page = c.pages[j];
    const int64_t pos = c.pos0 + int64_t(j) * kMlaPage;
    const int n_lo = int(std::clamp<int64_t>(vis_min - pos, 0, kMlaPage));
    const int n_hi = int(std::clamp<int64_t>(vis_max - pos, 0, kMlaPage));
    const uint8_t* next = j + 1 < c.npages ? c.pages[j + 1] : c.next_page;
    Prefetch pf{reinterpret_cast<const char*>(next),
                next ? reinterpret_cast<const char*>(next) + kMlaPage * (fp8 ? kFp8Row : kBf16Row) : nullptr};
    const uint8_t* latent = page;
    int64_t latent_bytes = kBf16Row;
    if (n_hi > 0) {
      if constexpr (kFma) {
        // The score tiles read whole token tiles (up to 16 tokens past n_hi, masked later).
        widen_keys(sc, page, fp8, int(std::min<int64_t>(kMlaPage, (n_hi + 15) / 16 * 16)));
        const uint8_t* kf = reinterpret_cast<const uint8_t*>(sc.kf);
        if (!fp8) {
          qk_pass<kKeyRow, Into::store, kFma>(kf, sc.qt, mp, kPairs, sc.s, page, n_hi, pf);
        } else {
          for (int g = 0; g < 4; ++g) {
            const uint32_t* q = sc.qt + int64_t(g) * kGroupPairs * q_step;
            const uint8_t* scale = page + kFp8Scales + 4 * g;
            const uint8_t* k = kf + 8 * kGroupPairs * g;
            if (g == 0) qk_pass<kKeyRow, Into::scaled_store, kFma>(k, q, mp, kGroupPairs, sc.s, scale, n_hi, pf);
            else qk_pass<kKeyRow, Into::scaled_add, kFma>(k, q, mp, kGroupPairs, sc.s, scale, n_hi, pf);
          }
          qk_pass<kKeyRow, Into::add, kFma>(kf + 8 * kLatentPairs, sc.qt + int64_t(kLatentPairs) * q_step, mp,
                                            kPairs - kLatentPairs, sc.s, page, n_hi, pf);
        }
      } else if (!fp8) {
        qk_pass<kBf16Row, Into::store, kFma>(page, sc.qt, mp, kPairs, sc.s, page, n_hi, pf);
      } else {
        for (int t = 0; t < n_hi; ++t)
          convert_avx512(page + t * kFp8Row, DType::f8e4m3, sc.kb + t * kMlaDv, DType::bf16, kMlaDv, false, 0);
        latent = reinterpret_cast<const uint8_t*>(sc.kb);
        latent_bytes = 2 * kMlaDv;
        for (int g = 0; g < 4; ++g) {
          const uint8_t* k = latent + 4 * kGroupPairs * g;
          const uint32_t* q = sc.qt + int64_t(g) * kGroupPairs * mp;
          const uint8_t* scale = page + kFp8Scales + 4 * g;
          if (g == 0) qk_pass<2 * kMlaDv, Into::scaled_store, kFma>(k, q, mp, kGroupPairs, sc.s, scale, n_hi, pf);
          else qk_pass<2 * kMlaDv, Into::scaled_add, kFma>(k, q, mp, kGroupPairs, sc.s, scale, n_hi, pf);
        }
        qk_pass<kFp8Row, Into::add, kFma>(page + kFp8Rope, sc.qt + int64_t(kLatentPairs) * mp, mp, kPairs - kLatentPairs,
                                    sc.s, page, n_hi, pf);
      }
    }
    softmax_page(sc, mp, pos, n_hi, c.scale);
    const int npairs = (n_lo + 1) / 2;
    pack_probabilities<kFma>(sc, mp, npairs, n_lo, fp8 ? 4 : 1, fp8 ? page : nullptr);
    if constexpr (!kFma) pack_values(sc, latent, latent_bytes, n_lo);
    pv_page<kFma>(sc, rows, mp, n_lo, fp8, c.o, j == 0);
    if (n_hi > n_lo)
      tail_tokens(sc, c, rows, mp, pos, n_lo, n_hi, latent, latent_bytes, kFma ? sc.kf : nullptr, page, c.o);
  }
  std::memcpy(c.row_max, sc.mx, size_t(rows) * 4);
  std::memcpy(c.row_sum, sc.sum, size_t(rows) * 4);
}

}  // namespace

void mla_chunk_avx512(const MlaChunk& c) { chunk<false>(c); }
void mla_chunk_fma_avx512(const MlaChunk& c) { chunk<true>(c); }

void mla_merge_avx512(int64_t rows, float* o, float* row_max, float* row_sum, const float* o2,
                      const float* row_max2, const float* row_sum2) {
  merge_rows(rows, o, row_max, row_sum, o2, row_max2, row_sum2, [](float* x, const float* y, float a, float b) {
    const __m512 va = _mm512_set1_ps(a), vb = _mm512_set1_ps(b);
    for (int d = 0; d < kMlaDv; d += 16)
      _mm512_storeu_ps(x + d, _mm512_fmadd_ps(_mm512_loadu_ps(x + d), va, _mm512_mul_ps(_mm512_loadu_ps(y + d), vb)));
  });
}

void mla_finish_avx512(const MlaFinish& f) {
  finish_rows(f, [](uint16_t* out, const float* o, float inv_sum) {
    const __m512 inv = _mm512_set1_ps(inv_sum);
    for (int d = 0; d < kMlaDv; d += 16)
      store16(out, DType::bf16, d, 0xFFFF, _mm512_mul_ps(_mm512_loadu_ps(o + d), inv));
  });
}

}  // namespace sol::kernels
