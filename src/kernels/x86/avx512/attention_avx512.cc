// Flash-attention tile primitives on AVX-512: the two GEMMs of each block on vdpbf16ps (bf16;
// f32 FMAs on widened A rows where the core prefers them) or vfmadd231ps (f32) in a 12 x 32
// register tile, and the score-row transforms (online
// softmax, gradient of the scores) 16 lanes at a time with exp16.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {

namespace {

// 12 rows x 2 vectors = 24 accumulators: vdpbf16ps (and the FMA) has a latency of ~6 cycles
// on each of 2 pipes, so >= 12 independent sums are needed to keep both busy; per k step the
// tile issues 24 multiplies for 2 panel loads and 12 broadcasts from A.
template <int MR>
[[gnu::always_inline]] inline void finish_tile(__m512 (&acc)[MR][2], const AttnGemmTile& t) {
  const __mmask16 lo = tail_mask(t.n), hi = tail_mask(t.n - 16 > 0 ? t.n - 16 : 0);
  for (int i = 0; i < MR; ++i) {
    float* c = t.c + i * t.ldc;
    if (t.accumulate) {
      const __m512 s = _mm512_set1_ps(t.row_scale ? t.row_scale[i] : 1.0f);
      acc[i][0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(lo, c), s, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(hi, c + 16), s, acc[i][1]);
    }
    _mm512_mask_storeu_ps(c, lo, acc[i][0]);
    _mm512_mask_storeu_ps(c + 16, hi, acc[i][1]);
  }
}

// The tile's A rows and, when accumulating, its C rows were last touched a whole key block ago
// and have mostly left L1 since: request them all before the k loop rather than stalling on
// them one by one (the A rows) or after it (C). A k step reads step_bytes of each A row (a bf16
// pair or an f32: 4; a widened pair: 8); es is A's element size.
template <int MR>
[[gnu::always_inline]] inline void prefetch_tile(const AttnGemmTile& t, int64_t es, int64_t step_bytes = 4) {
  const int64_t row_bytes = t.k_steps * step_bytes;
  for (int i = 0; i < MR; ++i) {
    const char* a = static_cast<const char*>(t.a) + i * t.lda * es;
    for (int64_t x = 0; x < row_bytes; x += 64) _mm_prefetch(a + x, _MM_HINT_T0);
  }
  if (t.accumulate)
    for (int i = 0; i < MR; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(t.c + i * t.ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(t.c + i * t.ldc + 16), _MM_HINT_T0);
    }
}

// kWidened: each bf16 pair as two f32 FMAs (first value, then second), for cores whose two FMA
// pipes outrun their vdpbf16ps (kPrefersFmaBf16). A's rows arrive widened (f32 holding bf16
// values), so its two values are broadcast from memory; B's pair is widened in registers (a
// bf16 is the top half of its f32: a shift, or a mask), 4 ALU uops per step beside 4 MR FMAs.
template <int MR, bool kWidened>
struct TileBf16Of {
  static void run(const AttnGemmTile& t) {
    if constexpr (kWidened) prefetch_tile<MR>(t, 4, 8);
    else prefetch_tile<MR>(t, 2);
    __m512 acc[MR][2];
    for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    const char* a = static_cast<const char*>(t.a);
    const uint16_t* b = static_cast<const uint16_t*>(t.b);
    for (int64_t k = 0; k < t.k_steps; ++k) {
      // Panels stream from L2 / L3 (a head's K and V outgrow L2 at long sequences).
      _mm_prefetch(reinterpret_cast<const char*>(b + 8 * 2 * kAttnPanel), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + 8 * 2 * kAttnPanel + 32), _MM_HINT_T0);
      const __m512i w0 = _mm512_loadu_si512(b), w1 = _mm512_loadu_si512(b + 32);
      if constexpr (kWidened) {
        const __m512 first[2] = {bf16_low_f32(w0), bf16_low_f32(w1)};
        const __m512 second[2] = {bf16_high_f32(w0), bf16_high_f32(w1)};
        const float* af = reinterpret_cast<const float*>(a) + 2 * k;
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) {
          const __m512 a0 = _mm512_set1_ps(af[i * t.lda]), a1 = _mm512_set1_ps(af[i * t.lda + 1]);
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) acc[i][h] = _mm512_fmadd_ps(a1, second[h], _mm512_fmadd_ps(a0, first[h], acc[i][h]));
        }
      } else {
        const int64_t lda = t.lda * 2;
#pragma GCC unroll 12
        for (int i = 0; i < MR; ++i) {
          int32_t pair;
          std::memcpy(&pair, a + i * lda + k * 4, 4);
          const __m512bh ai = (__m512bh)_mm512_set1_epi32(pair);
          acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, (__m512bh)w0);
          acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, (__m512bh)w1);
        }
      }
      b += 2 * kAttnPanel;
    }
    finish_tile<MR>(acc, t);
  }
};
template <int MR>
using TileBf16 = TileBf16Of<MR, false>;
template <int MR>
using TileBf16Widened = TileBf16Of<MR, true>;

template <int MR>
struct TileF32 {
  static void run(const AttnGemmTile& t) {
    prefetch_tile<MR>(t, 4);
    __m512 acc[MR][2];
    for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    const float* a = static_cast<const float*>(t.a);
    const float* b = static_cast<const float*>(t.b);
    for (int64_t k = 0; k < t.k_steps; ++k) {
      _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kAttnPanel), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kAttnPanel + 16), _MM_HINT_T0);
      const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        const __m512 ai = _mm512_set1_ps(a[i * t.lda + k]);
        acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
      }
      b += kAttnPanel;
    }
    finish_tile<MR>(acc, t);
  }
};

template <template <int> class Kernel, int... Rows>
void dispatch_rows(const AttnGemmTile& t, std::integer_sequence<int, Rows...>) {
  using Fn = void (*)(const AttnGemmTile&);
  static constexpr Fn table[] = {&Kernel<Rows + 1>::run...};
  table[t.m - 1](t);
}

// Lanes [lo, hi) of the 16 starting at column c.
[[gnu::always_inline]] inline __mmask16 visible(int c, int lo, int hi) {
  const int a = lo - c < 0 ? 0 : lo - c > 16 ? 16 : lo - c;
  const int b = hi - c < 0 ? 0 : hi - c > 16 ? 16 : hi - c;
  return __mmask16(((1u << b) - 1) & ~((1u << a) - 1));
}

// Stores 16 values as f32 or bf16 (vcvtneps2bf16: round to nearest even) and returns what was
// stored, widened back to f32.
[[gnu::always_inline]] inline __m512 store_row16(void* p, int64_t i, bool bf16, bool widened, __m512 v) {
  if (!bf16) {
    _mm512_storeu_ps(static_cast<float*>(p) + i, v);
    return v;
  }
  const __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
  const __m512 rounded = bf16x16_to_f32(h);
  if (widened) _mm512_storeu_ps(static_cast<float*>(p) + i, rounded);
  else _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(p) + i), h);
  return rounded;
}

}  // namespace

void attn_gemm_tile_bf16_avx512(const AttnGemmTile& t) {
  dispatch_rows<TileBf16>(t, std::make_integer_sequence<int, kAttnTileRows>{});
}

void attn_gemm_tile_bf16_widened_avx512(const AttnGemmTile& t) {
  dispatch_rows<TileBf16Widened>(t, std::make_integer_sequence<int, kAttnTileRows>{});
}

void attn_gather_widened_avx512(const void* src, int64_t stride_bytes, int64_t rows, int64_t cols, float* dst) {
  for (int64_t i = 0; i < rows; ++i)
    convert_avx512(static_cast<const char*>(src) + i * stride_bytes, DType::bf16, dst + i * cols, DType::f32, cols,
                   false, 0);
}

void attn_gemm_tile_f32_avx512(const AttnGemmTile& t) {
  dispatch_rows<TileF32>(t, std::make_integer_sequence<int, kAttnTileRows>{});
}

void attn_store_rows_avx512(const AttnStoreRows& r) {
  const DType t = r.bf16 ? DType::bf16 : DType::f32;
  for (int64_t i = 0; i < r.m; ++i) {
    const __m512 s = _mm512_set1_ps((r.row_scale ? r.row_scale[i] : 1.0f) * r.scale);
    const float* acc = r.acc + i * r.lda;
    char* out = static_cast<char*>(r.out) + i * r.ldo * (r.bf16 ? 2 : 4);
    for (int64_t d = 0; d < r.n; d += 16) {
      const __mmask16 m = tail_mask(r.n - d);
      store16(out, t, d, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + d), s));
    }
  }
}

// 32-bit words (bf16 pairs or f32 values) of 16 rows at a time, gathered column by column, so
// the packed panel is written in order.
void attn_pack_transposed_avx512(const void* src, int64_t ld, bool bf16, int64_t rows, int64_t cols, void* dst) {
  const int64_t es = bf16 ? 2 : 4, words = bf16 ? cols / 2 : cols, row_bytes = ld * es;
  const __m512i step = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(int32_t(row_bytes)));
  const __m512i step_hi = _mm512_add_epi32(step, _mm512_set1_epi32(int32_t(16 * row_bytes)));
  int32_t* out = static_cast<int32_t*>(dst);
  for (int64_t r0 = 0; r0 < rows + 31 - (rows + 31) % 32; r0 += 32) {
    const int64_t nr = std::min<int64_t>(32, rows - r0);
    const __mmask16 lo = tail_mask(nr), hi = tail_mask(nr > 16 ? nr - 16 : 0);
    const char* base = static_cast<const char*>(src) + r0 * row_bytes;
    for (int64_t c = 0; c < words; ++c, out += 32) {
      _mm512_storeu_si512(out, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), lo, step, base + c * 4, 1));
      _mm512_storeu_si512(out + 16, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), hi, step_hi, base + c * 4, 1));
    }
  }
}

void attn_pack_interleaved_avx512(const void* src, int64_t ld, bool bf16, int64_t rows, int64_t cols, void* dst) {
  const int64_t rows_pad = (rows + 31) / 32 * 32;
  if (!bf16) {
    float* out = static_cast<float*>(dst);
    for (int64_t c0 = 0; c0 < cols; c0 += 32) {
      const __mmask16 lo = tail_mask(cols - c0), hi = tail_mask(cols - c0 > 16 ? cols - c0 - 16 : 0);
      for (int64_t r = 0; r < rows_pad; ++r, out += 32) {
        const float* in = static_cast<const float*>(src) + r * ld + c0;
        const bool live = r < rows;
        _mm512_storeu_ps(out, live ? _mm512_maskz_loadu_ps(lo, in) : _mm512_setzero_ps());
        _mm512_storeu_ps(out + 16, live ? _mm512_maskz_loadu_ps(hi, in + 16) : _mm512_setzero_ps());
      }
    }
    return;
  }
  // Rows r and r+1 of 32 columns: (a0 b0 a1 b1 ...) by two two-source word permutes.
  alignas(64) int16_t idx[64];
  for (int c = 0; c < 32; ++c) {
    idx[2 * c] = int16_t(c % 16 + (c >= 16 ? 16 : 0));
    idx[2 * c + 1] = int16_t(32 + c % 16 + (c >= 16 ? 16 : 0));
  }
  const __m512i first = _mm512_load_si512(idx), second = _mm512_load_si512(idx + 32);
  uint16_t* out = static_cast<uint16_t*>(dst);
  for (int64_t c0 = 0; c0 < cols; c0 += 32) {
    const __mmask32 m = cols - c0 >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << (cols - c0)) - 1);
    for (int64_t r = 0; r < rows_pad; r += 2, out += 64) {
      const uint16_t* in = static_cast<const uint16_t*>(src) + r * ld + c0;
      const __m512i a = r < rows ? _mm512_maskz_loadu_epi16(m, in) : _mm512_setzero_si512();
      const __m512i b = r + 1 < rows ? _mm512_maskz_loadu_epi16(m, in + ld) : _mm512_setzero_si512();
      _mm512_storeu_si512(out, _mm512_permutex2var_epi16(a, first, b));
      _mm512_storeu_si512(out + 32, _mm512_permutex2var_epi16(a, second, b));
    }
  }
}

void attn_softmax_rows_avx512(const AttnSoftmaxRows& r) {
  const __m512 scale = _mm512_set1_ps(r.scale);
  for (int i = 0; i < r.m; ++i) {
    const float* s = r.s + i * r.lds;
    const int lo = r.lo[i] < 0 ? 0 : r.lo[i] > r.n ? r.n : r.lo[i];
    const int hi = r.hi[i] < lo ? lo : r.hi[i] > r.n ? r.n : r.hi[i];
    const bool all = lo == 0 && hi == r.n;
    __m512 mx = _mm512_set1_ps(-INFINITY);
    __mmask16 nan = 0;
    if (hi > lo)
      for (int c = 0; c < r.n; c += 16) {
        const __mmask16 m = all ? __mmask16(0xFFFF) : visible(c, lo, hi);
        const __m512 v = _mm512_maskz_loadu_ps(m, s + c);
        nan |= _mm512_mask_cmp_ps_mask(m, v, v, _CMP_UNORD_Q);
        mx = _mm512_mask_max_ps(mx, m, mx, v);
      }
    const float old = r.row_max[i];
    // A NaN score makes the running maximum NaN, and with it every later P and the row's sum.
    const float now = nan ? NAN : hi > lo ? std::max(old, _mm512_reduce_max_ps(mx) * r.scale) : old;
    const int64_t row = i * r.ldp;
    if (now == -INFINITY) {  // nothing seen yet: the output row is still all zeros
      r.alpha[i] = 1.0f;
      for (int c = 0; c < r.n; c += 16) store_row16(r.p, row + c, r.p_bf16, r.p_widened, _mm512_setzero_ps());
      continue;
    }
    r.alpha[i] = std::exp(old - now);
    const __m512 vnow = _mm512_set1_ps(now);
    __m512 sum = _mm512_setzero_ps();
    for (int c = 0; c < r.n; c += 16) {
      __m512 e = exp16(_mm512_fmsub_ps(_mm512_loadu_ps(s + c), scale, vnow));
      if (!all) e = _mm512_maskz_mov_ps(visible(c, lo, hi), e);
      sum = _mm512_add_ps(sum, store_row16(r.p, row + c, r.p_bf16, r.p_widened, e));
    }
    r.row_max[i] = now;
    r.row_sum[i] = r.row_sum[i] * r.alpha[i] + _mm512_reduce_add_ps(sum);
  }
}

void attn_grad_rows_avx512(const AttnGradRows& r) {
  const __m512 scale = _mm512_set1_ps(r.scale);
  for (int i = 0; i < r.m; ++i) {
    const int lo = r.lo[i] < 0 ? 0 : r.lo[i] > r.n ? r.n : r.lo[i];
    const int hi = r.hi[i] < lo ? lo : r.hi[i] > r.n ? r.n : r.hi[i];
    const float* s = r.s + i * r.ld;
    const float* dp = r.dp + i * r.ld;
    const int64_t row = i * r.ldo;
    const __m512 row_lse = _mm512_set1_ps(r.per_column ? 0.0f : r.lse[i]);
    const __m512 row_delta = _mm512_set1_ps(r.per_column ? 0.0f : r.delta[i]);
    for (int c = 0; c < r.n; c += 16) {
      const __mmask16 m = visible(c, lo, hi);
      __m512 p = _mm512_setzero_ps(), ds = _mm512_setzero_ps();
      if (m) {
        const __m512 lse = r.per_column ? _mm512_loadu_ps(r.lse + c) : row_lse;
        const __m512 delta = r.per_column ? _mm512_loadu_ps(r.delta + c) : row_delta;
        p = _mm512_maskz_mov_ps(m, exp16(_mm512_fmsub_ps(_mm512_loadu_ps(s + c), scale, lse)));
        ds = _mm512_mul_ps(p, _mm512_sub_ps(_mm512_loadu_ps(dp + c), delta));
      }
      if (r.p) store_row16(r.p, row + c, r.out_bf16, r.out_widened, p);
      store_row16(r.ds, row + c, r.out_bf16, r.out_widened, ds);
    }
  }
}

}  // namespace sol::kernels
