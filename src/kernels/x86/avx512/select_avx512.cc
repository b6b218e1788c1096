// AVX-512 top-k selection. The filter compares 64 elements per step and one branch skips them
// when none passes, the common case once the threshold has risen; matches are packed with
// register vcompressps (the memory form is microcoded and slow on AMD) and stored whole. The cut
// is a quickselect whose partitions are the same register compresses, so it costs a few passes
// over the (small) candidate buffer and branches only once per level.
#include <algorithm>

#include "kernels/select.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {

namespace {

// How far ahead the filter requests its row. One core's DRAM stream measured (probe beside this
// kernel's loop, 16 rows x 129280 f32 cold): no prefetch 37 GB/s, 8 KiB ahead 38, 16 KiB 41-43
// (T0; T1 no different in the op), 32 or 64 KiB no better.
constexpr int64_t kPrefetchAhead = 16384;

[[gnu::always_inline]] inline __m512i order_keys(__m512 x) {
  const __m512i b = _mm512_castps_si512(x);
  const __m512i flip = _mm512_or_si512(_mm512_srli_epi32(_mm512_srai_epi32(b, 31), 1), _mm512_set1_epi32(INT32_MIN));
  return _mm512_xor_si512(b, flip);  // negative: all bits flipped; else: the sign bit set
}

[[gnu::always_inline]] inline int64_t append(__m512 v, __mmask16 hit, __m512i ids, uint32_t* key, int32_t* idx) {
  _mm512_storeu_si512(key, _mm512_maskz_compress_epi32(hit, order_keys(v)));
  _mm512_storeu_si512(idx, _mm512_maskz_compress_epi32(hit, ids));
  return __builtin_popcount(hit);
}

uint32_t median_of_three(uint32_t a, uint32_t b, uint32_t c) { return std::max(std::min(a, b), std::min(std::max(a, b), c)); }

// One branch per 64 elements skips them when none passes. Always compressing instead (no
// branch, the count advancing by the hits only) was tried: the op got slower (docs/perf/
// layer-ops.md, tried and rejected), though a bare probe loop had read faster so.
template <DType T>
int64_t collect_above(const void* x, int64_t n, float thr, int32_t base, uint32_t* key, int32_t* idx) {
  constexpr int64_t es = T == DType::bf16 ? 2 : 4;
  const __m512 tv = _mm512_set1_ps(thr);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const char* ahead = static_cast<const char*>(x) + kPrefetchAhead;
  int64_t count = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    // One request per line of this step (4 for f32, 2 for bf16), kPrefetchAhead further on.
    for (int64_t b = 0; b < 64 * es; b += 64) _mm_prefetch(ahead + i * es + b, _MM_HINT_T0);
    const __m512 v0 = load16(x, T, i, 0xFFFF), v1 = load16(x, T, i + 16, 0xFFFF);
    const __m512 v2 = load16(x, T, i + 32, 0xFFFF), v3 = load16(x, T, i + 48, 0xFFFF);
    // Ordered greater-than: false for NaN, so NaN logits never become candidates.
    const __mmask16 h0 = _mm512_cmp_ps_mask(v0, tv, _CMP_GT_OQ), h1 = _mm512_cmp_ps_mask(v1, tv, _CMP_GT_OQ);
    const __mmask16 h2 = _mm512_cmp_ps_mask(v2, tv, _CMP_GT_OQ), h3 = _mm512_cmp_ps_mask(v3, tv, _CMP_GT_OQ);
    if (__builtin_expect((h0 | h1 | h2 | h3) == 0, 1)) continue;
    const __m512i ids = _mm512_add_epi32(lane, _mm512_set1_epi32(base + int32_t(i)));
    count += append(v0, h0, ids, key + count, idx + count);
    count += append(v1, h1, _mm512_add_epi32(ids, _mm512_set1_epi32(16)), key + count, idx + count);
    count += append(v2, h2, _mm512_add_epi32(ids, _mm512_set1_epi32(32)), key + count, idx + count);
    count += append(v3, h3, _mm512_add_epi32(ids, _mm512_set1_epi32(48)), key + count, idx + count);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = load16(x, T, i, m);
    const __mmask16 h = _mm512_mask_cmp_ps_mask(m, v, tv, _CMP_GT_OQ);
    if (h) count += append(v, h, _mm512_add_epi32(lane, _mm512_set1_epi32(base + int32_t(i))), key + count, idx + count);
  }
  return count;
}

}  // namespace

int64_t collect_above_avx512(const void* x, DType t, int64_t n, float thr, int32_t base, uint32_t* key, int32_t* idx) {
  return t == DType::bf16 ? collect_above<DType::bf16>(x, n, thr, base, key, idx)
                          : collect_above<DType::f32>(x, n, thr, base, key, idx);
}

// The k-th largest key is the largest U with at least k keys >= U; built from the top bit
// down, keeping each bit when enough keys reach the prefix: 32 passes, each a compare and a
// masked add per 16 keys, no data-dependent branch.
KthKey kth_largest_bitwise_avx512(const uint32_t* key, int64_t n, int64_t k) {
  auto count_at_least = [&](uint32_t bound, bool strictly) {
    const __m512i bv = _mm512_set1_epi32(int32_t(bound)), one = _mm512_set1_epi32(1);
    __m512i count = _mm512_setzero_si512();
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      const __m512i v = _mm512_maskz_loadu_epi32(m, key + i);
      const __mmask16 hit = strictly ? _mm512_mask_cmpgt_epu32_mask(m, v, bv) : _mm512_mask_cmpge_epu32_mask(m, v, bv);
      count = _mm512_mask_add_epi32(count, hit, count, one);
    }
    return int64_t(_mm512_reduce_add_epi32(count));
  };
  uint32_t u = 0;
  for (int bit = 31; bit >= 0; --bit)
    if (const uint32_t cand = u | (1u << bit); count_at_least(cand, false) >= k) u = cand;
  return {u, count_at_least(u, true)};
}

// Quickselect: each level splits the keys into those above and below a median-of-three pivot
// (compressed into two regions of one scratch buffer, the two buffers taking turns as source
// and destination); the k-th falls above, among the pivot's equals (done), or below.
KthKey kth_largest_avx512(const uint32_t* key, int64_t n, int64_t k, uint32_t* scratch) {
  const int64_t region = n + kSelectSlack;
  uint32_t* const buffers[2] = {scratch, scratch + 2 * region};
  const uint32_t* src = key;
  int64_t above = 0;
  for (int level = 0; n > 16; ++level) {
    if (level == 48) {  // pivots keep splitting badly: bounded work instead
      KthKey r = kth_largest_bitwise_avx512(src, n, k);
      return {r.key, r.above + above};
    }
    const uint32_t pivot = median_of_three(src[n / 4], src[n / 2], src[n - 1 - n / 4]);
    const __m512i pv = _mm512_set1_epi32(int32_t(pivot));
    uint32_t* const hi = buffers[level & 1];
    uint32_t* const lo = hi + region;
    int64_t nh = 0, nl = 0;
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      const __m512i v = _mm512_maskz_loadu_epi32(m, src + i);
      const __mmask16 gt = _mm512_mask_cmpgt_epu32_mask(m, v, pv), lt = _mm512_mask_cmplt_epu32_mask(m, v, pv);
      _mm512_storeu_si512(hi + nh, _mm512_maskz_compress_epi32(gt, v));
      _mm512_storeu_si512(lo + nl, _mm512_maskz_compress_epi32(lt, v));
      nh += __builtin_popcount(gt);
      nl += __builtin_popcount(lt);
    }
    const int64_t equal = n - nh - nl;
    if (k <= nh) {
      src = hi, n = nh;
    } else if (k <= nh + equal) {
      return {pivot, above + nh};
    } else {
      above += nh + equal, k -= nh + equal;
      src = lo, n = nl;
    }
  }
  // At most 16 keys: the one with fewer than k keys above it and at least k at or above.
  const __mmask16 m = tail_mask(n);
  const __m512i v = _mm512_maskz_loadu_epi32(m, src);
  for (int64_t j = 0;; ++j) {
    const __m512i x = _mm512_set1_epi32(int32_t(src[j]));
    const int gt = __builtin_popcount(_mm512_mask_cmpgt_epu32_mask(m, v, x));
    if (gt < k && k <= __builtin_popcount(_mm512_mask_cmpge_epu32_mask(m, v, x))) return {src[j], above + gt};
  }
}

uint32_t keep_best_avx512(uint32_t* key, int32_t* idx, int64_t n, int64_t k, uint32_t* scratch) {
  const KthKey kth = kth_largest_avx512(key, n, k, scratch);
  const __m512i kv = _mm512_set1_epi32(int32_t(kth.key));
  int64_t ties = k - kth.above, out = 0;  // keys equal to the k-th that still fit, lowest idx first
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512i v = _mm512_maskz_loadu_epi32(m, key + i), ids = _mm512_maskz_loadu_epi32(m, idx + i);
    __mmask16 eq = _mm512_mask_cmpeq_epu32_mask(m, v, kv);
    if (__builtin_expect(eq != 0, 0)) {
      __mmask16 fit = 0;
      for (int64_t left = ties; eq && left > 0; --left, --ties) {
        fit |= __mmask16(eq & -eq);  // the lowest remaining equal lane
        eq &= __mmask16(eq - 1);
      }
      eq = fit;
    }
    const __mmask16 sel = _mm512_mask_cmpgt_epu32_mask(m, v, kv) | eq;
    // In place: out <= i, and this vector is loaded before anything is written over it.
    _mm512_storeu_si512(key + out, _mm512_maskz_compress_epi32(sel, v));
    _mm512_storeu_si512(idx + out, _mm512_maskz_compress_epi32(sel, ids));
    out += __builtin_popcount(sel);
  }
  return kth.key;
}

// rank(i) = how many pairs are better than pair i; the ranks of distinct pairs are 0..n-1, so
// each pair goes straight to its place. Eight pairs' ranks build at once against every other.
void order_best_first_avx512(uint32_t* key, int32_t* idx, int64_t n, uint64_t* scratch) {
  if (n > kRankSortMax) {
    order_best_first_scalar(key, idx, n, scratch);
    return;
  }
  uint64_t word[kRankSortMax + 8];
  uint32_t rank[kRankSortMax + 8], key0[kRankSortMax];
  int32_t idx0[kRankSortMax];
  for (int64_t i = 0; i < n; ++i) word[i] = uint64_t(key[i]) << 32 | ~uint32_t(idx[i]), key0[i] = key[i], idx0[i] = idx[i];
  const __m512i one = _mm512_set1_epi64(1);
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 m = __mmask8(n - i >= 8 ? 0xFF : (1u << (n - i)) - 1);
    const __m512i w = _mm512_maskz_loadu_epi64(m, word + i);
    __m512i r = _mm512_setzero_si512();
    for (int64_t j = 0; j < n; ++j)
      r = _mm512_mask_add_epi64(r, _mm512_cmpgt_epu64_mask(_mm512_set1_epi64(int64_t(word[j])), w), r, one);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(rank + i), _mm512_cvtepi64_epi32(r));
  }
  for (int64_t i = 0; i < n; ++i) key[rank[i]] = key0[i], idx[rank[i]] = idx0[i];
}

}  // namespace sol::kernels
