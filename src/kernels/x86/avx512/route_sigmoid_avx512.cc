// Fused AVX-512 sigmoid routing (kernels/route.h route_sigmoid_rows_avx512): one token from
// its logits to its outputs in one function, so nothing of it crosses a call or a scratch row.
#include <algorithm>
#include <array>
#include <climits>
#include <utility>

#include "kernels/x86/avx512/route16_avx512.h"
#include "kernels/x86/avx512/sigmoid16_avx512.h"

namespace sol::kernels {

namespace {

// Per lane the two largest keys seen (h >= l).
struct Top2 {
  __m512i h, l;
};

[[gnu::always_inline]] inline Top2 merge(Top2 a, Top2 b) {
  return {_mm512_max_epi32(a.h, b.h), _mm512_max_epi32(_mm512_min_epi32(a.h, b.h), _mm512_max_epi32(a.l, b.l))};
}

struct Lanes {
  alignas(64) int32_t v[16];
};

// Index tables of the transposed fold. Two vectors x, y hold S segments each (one group per
// segment, 16 / S lanes); the result holds 2S segments of half the width, x's groups first:
// `low` picks the lower half of each segment, `high` the upper half (y's lanes are 16..31).
constexpr Lanes halves(int s, bool high) {
  Lanes t{};
  const int w = 16 / s, h = w / 2;
  for (int l = 0; l < 16; ++l) {
    const int j = l / h, o = l % h;
    t.v[l] = (j < s ? j * w + o : 16 + (j - s) * w + o) + (high ? h : 0);
  }
  return t;
}
// Within one vector of segments of width 2h: lane l takes lane l + h (the upper half of its
// segment) for the lower half; the other lanes are not used afterwards.
constexpr Lanes shift_down(int h) {
  Lanes t{};
  for (int l = 0; l < 16; ++l) t.v[l] = (l % (2 * h)) < h ? l + h : l;
  return t;
}
// Lanes 0 .. g-1 take the first lane of segment g (segments of width w).
constexpr Lanes firsts(int w) {
  Lanes t{};
  for (int l = 0; l < 16; ++l) t.v[l] = l * w < 16 ? l * w : 0;
  return t;
}

template <int S>
[[gnu::always_inline]] inline Top2 combine(Top2 x, Top2 y) {
  static constexpr Lanes lo = halves(S, false), hi = halves(S, true);
  const __m512i il = _mm512_load_si512(lo.v), ih = _mm512_load_si512(hi.v);
  return merge({_mm512_permutex2var_epi32(x.h, il, y.h), _mm512_permutex2var_epi32(x.l, il, y.l)},
               {_mm512_permutex2var_epi32(x.h, ih, y.h), _mm512_permutex2var_epi32(x.l, ih, y.l)});
}

// N vectors of S segments each -> one vector of N * S segments.
template <int N, int S>
[[gnu::always_inline]] inline Top2 fold_vectors(const std::array<Top2, N>& v) {
  if constexpr (N == 1) {
    return v[0];
  } else {
    std::array<Top2, N / 2> w;
    for (int i = 0; i < N / 2; ++i) w[size_t(i)] = combine<S>(v[size_t(2 * i)], v[size_t(2 * i + 1)]);
    return fold_vectors<N / 2, 2 * S>(w);
  }
}

// Segments of width W folded to their first lane.
template <int W>
[[gnu::always_inline]] inline Top2 fold_segments(Top2 a) {
  if constexpr (W == 1) {
    return a;
  } else {
    static constexpr Lanes sh = shift_down(W / 2);
    const __m512i i = _mm512_load_si512(sh.v);
    return fold_segments<W / 2>(merge(a, {_mm512_permutexvar_epi32(i, a.h), _mm512_permutexvar_epi32(i, a.l)}));
  }
}

// The topk_group best of G groups (G <= 8) by their scores' keys, lanes 0 .. G-1; ties to the
// lower group. Each key is widened to a 64-bit (key, 7 - group) pair, all different, so a
// group's rank is just the number of larger pairs, counted over the 7 rotations of 8 lanes.
template <int G>
[[gnu::always_inline]] inline uint32_t best_groups(__m512i group_key, int64_t topk_group) {
  const __m512i pair = _mm512_or_si512(_mm512_slli_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(group_key)), 32),
                                       _mm512_setr_epi64(7, 6, 5, 4, 3, 2, 1, 0));
  const __m512i c = _mm512_mask_mov_epi64(_mm512_set1_epi64(INT64_MIN), __mmask8((1u << G) - 1), pair);
  const __m512i one = _mm512_set1_epi64(1);
  __m512i rank = _mm512_setzero_si512();
  for (int r = 1; r < 8; ++r) {
    const __m512i rot = _mm512_permutexvar_epi64(
        _mm512_setr_epi64(r % 8, (r + 1) % 8, (r + 2) % 8, (r + 3) % 8, (r + 4) % 8, (r + 5) % 8, (r + 6) % 8, (r + 7) % 8), c);
    rank = _mm512_mask_add_epi64(rank, _mm512_cmpgt_epi64_mask(rot, c), rank, one);
  }
  return uint32_t(_mm512_cmplt_epi64_mask(rank, _mm512_set1_epi64(topk_group))) & ((1u << G) - 1);
}

// Scores and keys of one token (key and score: its rows of e entries), group by group,
// folding each group's per-lane top two on the way; returns the groups' top two, lane 0 .. G-1.
template <int G, int NV, bool kBf16>
[[gnu::always_inline]] inline Top2 scores_and_groups(const RouteSigmoidRows& r, const char* row, int32_t* key,
                                                     float* score) {
  constexpr int per_v = NV / G;
  std::array<Top2, G> group;
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) {
    Top2 t{_mm512_set1_epi32(INT_MIN), _mm512_set1_epi32(INT_MIN)};
#pragma GCC unroll 16
    for (int j = 0; j < per_v; ++j) {
      const int i = (g * per_v + j) * 16;
      const __m512 s = sigmoid16(load16(row, kBf16 ? DType::bf16 : DType::f32, i, __mmask16(0xFFFF)));
      _mm512_store_ps(score + i, s);
      const __m512i kv = key16(r.bias ? _mm512_add_ps(s, _mm512_loadu_ps(r.bias + i)) : s);
      _mm512_store_si512(key + i, kv);
      if constexpr (G > 1) {
        if (j == 0) t.h = kv;
        else if (j == 1) t = {_mm512_max_epi32(t.h, kv), _mm512_min_epi32(t.h, kv)};
        else t = {_mm512_max_epi32(t.h, kv), _mm512_max_epi32(t.l, _mm512_min_epi32(t.h, kv))};
      }
    }
    group[size_t(g)] = t;
  }
  if constexpr (G > 1) {
    // Each group's best two over its lanes, all groups at once: G vectors folded into one of G
    // segments, the segments folded to one lane each.
    const Top2 f = fold_segments<16 / G>(fold_vectors<G, 1>(group));
    static constexpr Lanes first = firsts(16 / G);
    const __m512i pick = _mm512_load_si512(first.v);
    return {_mm512_permutexvar_epi32(pick, f.h), _mm512_permutexvar_epi32(pick, f.l)};
  } else {
    return group[0];
  }
}

// The eligible vectors of one token in increasing index (a group's score: the sum of its best
// two); returns how many.
template <int G, int NV>
[[gnu::always_inline]] inline int64_t eligible_vectors(const RouteSigmoidRows& r, Top2 f, int32_t* vec) {
  constexpr int per_v = NV / G;
  int64_t nl = 0;
  if constexpr (G > 1) {
    uint32_t chosen = best_groups<G>(key16(_mm512_add_ps(score16(f.h), score16(f.l))), r.topk_group);
    while (chosen) {
      const int g = __builtin_ctz(chosen);
      chosen &= chosen - 1;
#pragma GCC unroll 16
      for (int j = 0; j < per_v; ++j) vec[nl++] = g * per_v + j;
    }
  } else {
    for (int v = 0; v < NV; ++v) vec[nl++] = v;
  }
  return nl;
}

// Per token of a step: its rows and what the top-k stages hand on.
struct TokenRows {
  alignas(64) float score[256];
  alignas(64) int32_t key[256];
  int32_t cand_key[256 + 16], cand_idx[256 + 16];
  int32_t vec[16];
};

// P tokens (1 or 2) routed together, stage by stage: each stage of the top k is a short chain
// of dependent steps (column maximum -> rank count -> reduction -> candidate pass -> rank
// count -> placement -> weights), and two tokens' chains side by side overlap where one
// token's would leave the core waiting.
template <int G, int NV, bool kBf16, int P>
[[gnu::always_inline]] inline void route_tokens(const RouteSigmoidRows& r, const char* const* row, TokenRows* tr,
                                                int32_t* const* best, float* const* out_w) {
  const int64_t k = r.k;
  Top2 f[P];
  for (int p = 0; p < P; ++p) f[p] = scores_and_groups<G, NV, kBf16>(r, row[p], tr[p].key, tr[p].score);
  int64_t nl = 0;
  for (int p = 0; p < P; ++p) nl = eligible_vectors<G, NV>(r, f[p], tr[p].vec);  // the same count for each token
  // The top k, as route_topk_avx512: a bound from the k-th largest column maximum (16
  // distinct experts, so every expert of the top k has a key >= it), the experts at or above
  // it collected in index order, ranked in registers when at most 16.
  __m512i bv[P];
  for (int p = 0; p < P; ++p) {
    int32_t bound = INT_MIN;
    if (k <= 16 && nl > 1) {
      const int32_t* key = tr[p].key;
      const int32_t* vec = tr[p].vec;
      __m512i col = _mm512_load_si512(key + 16 * vec[0]);
      for (int64_t l = 1; l < nl; ++l) col = _mm512_max_epi32(col, _mm512_load_si512(key + 16 * vec[l]));
      bound = kth_largest(col, k);
    }
    bv[p] = _mm512_set1_epi32(bound);
  }
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t count[P];
  __m512i ck[P], ci[P];
  for (int p = 0; p < P; ++p) count[p] = 0, ck[p] = _mm512_set1_epi32(INT_MIN), ci[p] = _mm512_setzero_si512();
  for (int64_t l = 0; l < nl; ++l)
    for (int p = 0; p < P; ++p) {
      const int32_t v = tr[p].vec[l];
      const __m512i kv = _mm512_load_si512(tr[p].key + 16 * v);
      const __mmask16 hit = _mm512_cmpge_epi32_mask(kv, bv[p]);
      const __m512i hit_key = _mm512_maskz_compress_epi32(hit, kv);
      const __m512i hit_idx = _mm512_maskz_compress_epi32(hit, _mm512_add_epi32(lane, _mm512_set1_epi32(16 * v)));
      _mm512_storeu_si512(tr[p].cand_key + count[p], hit_key);
      _mm512_storeu_si512(tr[p].cand_idx + count[p], hit_idx);
      if (count[p] < 16) {
        const __mmask16 from = __mmask16(0xFFFFu << count[p]);
        const __m512i shift = _mm512_sub_epi32(lane, _mm512_set1_epi32(int32_t(count[p])));
        ck[p] = _mm512_mask_permutexvar_epi32(ck[p], from, shift, hit_key);
        ci[p] = _mm512_mask_permutexvar_epi32(ci[p], from, shift, hit_idx);
      }
      count[p] += __builtin_popcount(hit);
    }
  for (int p = 0; p < P; ++p) {
    if (count[p] <= 16) {
      const __mmask16 present = tail_mask(count[p]);
      const __m512i rank = ranks16(_mm512_mask_mov_epi32(_mm512_set1_epi32(INT_MIN), present, ck[p]), present);
      // Every lane is placed, a fixed 16 stores (a loop to `count` mispredicted its exit on
      // most tokens): the empty lanes rank at count or later, after every candidate, into the
      // spare slots (< 16: count larger keys, or fewer than 16 lanes beating them with the
      // index rule).
      alignas(64) int32_t rank_of[16], idx_of[16], by_rank[17];
      _mm512_store_si512(rank_of, rank);
      _mm512_store_si512(idx_of, ci[p]);
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) by_rank[rank_of[j]] = idx_of[j];
      for (int64_t j = 0; j < k; ++j) best[p][j] = by_rank[j];
    } else {
      // Ties, NaN or k > 16: rank the candidates by (key, lower index) in scalar code.
      const int32_t* ckey = tr[p].cand_key;
      const int32_t* cidx = tr[p].cand_idx;
      int32_t order[256 + 16];
      for (int64_t j = 0; j < count[p]; ++j) order[j] = int32_t(j);
      std::partial_sort(order, order + k, order + count[p], [&](int32_t a, int32_t b) {
        return ckey[a] != ckey[b] ? ckey[a] > ckey[b] : cidx[a] < cidx[b];
      });
      for (int64_t j = 0; j < k; ++j) best[p][j] = cidx[order[j]];
    }
  }
  // The weights, as the op's scalar loop (same order, same bits).
  for (int p = 0; p < P; ++p) {
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) {
      out_w[p][j] = tr[p].score[best[p][j]];
      sum += out_w[p][j];
    }
    const float factor = r.renormalize ? r.scaling / sum : r.scaling;
    for (int64_t j = 0; j < k; ++j) out_w[p][j] *= factor;
  }
}

// Tokens per step of route_tokens (the last step takes what is left, one at a time).
constexpr int kTokensPerStep = 3;

template <int G, int NV, bool kBf16>
void route_rows(const RouteSigmoidRows& r, int64_t t0, int64_t t1) {
  constexpr int P = kTokensPerStep;
  TokenRows tr[P];
  const int64_t row_bytes = r.e * int64_t(dtype_size(r.dtype));
  const char* logits = static_cast<const char*>(r.logits);
  // The rows are small (1 KiB for V3) and the work per row large: the lines of the rows a few
  // tokens ahead are requested here, as the hardware prefetcher does not keep up.
  auto prefetch = [&](int64_t t) {
    if (t < t1)
      for (int64_t b = 0; b < row_bytes; b += 64) asm volatile("prefetcht0 %0" : : "m"(logits[t * row_bytes + b]));
  };
  // The loop requests rows 2P ahead; the first 16 rows are requested here, all at once, so a
  // decode-sized call (16 tokens) does not meet DRAM latency row after row (faster than 2P = 6
  // rows up front, and than none: docs/perf/layer-ops.md).
  for (int64_t u = t0; u < t0 + 16; ++u) prefetch(u);
  int64_t t = t0;
  for (; t + P <= t1; t += P) {
    const char* row[P];
    int32_t* best[P];
    float* w[P];
    for (int p = 0; p < P; ++p) {
      prefetch(t + 2 * P + p);
      row[p] = logits + (t + p) * row_bytes;
      best[p] = r.idx + (t + p) * r.k;
      w[p] = r.weights + (t + p) * r.k;
    }
    route_tokens<G, NV, kBf16, P>(r, row, tr, best, w);
  }
  for (; t < t1; ++t) {
    const char* row[1] = {logits + t * row_bytes};
    int32_t* best[1] = {r.idx + t * r.k};
    float* w[1] = {r.weights + t * r.k};
    route_tokens<G, NV, kBf16, 1>(r, row, tr, best, w);
  }
}

}  // namespace

namespace {
using RowsFn = void (*)(const RouteSigmoidRows&, int64_t, int64_t);

template <int G, bool kBf16, int NV>
constexpr RowsFn instance() {
  if constexpr (NV % G == 0) return route_rows<G, NV, kBf16>;
  else return nullptr;
}

// The instance for G groups of experts and nv = e / 16 vectors (1 .. 16, a multiple of G).
template <int G, bool kBf16, int... NV>
RowsFn pick(int64_t nv, std::integer_sequence<int, NV...>) {
  RowsFn fn = nullptr;
  ((fn = NV + 1 == nv ? instance<G, kBf16, NV + 1>() : fn), ...);
  return fn;
}
}  // namespace

void route_sigmoid_rows_avx512(const RouteSigmoidRows& r, int64_t t0, int64_t t1) {
  const int64_t nv = r.e / 16;
  const auto seq = std::make_integer_sequence<int, 16>{};
  const bool bf16 = r.dtype == DType::bf16;
  RowsFn fn = nullptr;
  switch (r.n_group) {
    case 1: fn = bf16 ? pick<1, true>(nv, seq) : pick<1, false>(nv, seq); break;
    case 2: fn = bf16 ? pick<2, true>(nv, seq) : pick<2, false>(nv, seq); break;
    case 4: fn = bf16 ? pick<4, true>(nv, seq) : pick<4, false>(nv, seq); break;
    default: fn = bf16 ? pick<8, true>(nv, seq) : pick<8, false>(nv, seq); break;
  }
  fn(r, t0, t1);
}

}  // namespace sol::kernels
