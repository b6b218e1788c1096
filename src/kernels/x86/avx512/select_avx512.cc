// AVX-512 threshold filter: 64 elements per step are compared and one branch skips them when
// none passes, the common case once the threshold has risen; matches are packed with register
// vcompressps (the memory form is microcoded and slow on AMD) and stored whole.
#include "kernels/select.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {

namespace {

[[gnu::always_inline]] inline int64_t append(__m512 v, __mmask16 hit, __m512i ids, float* val, int32_t* idx) {
  _mm512_storeu_ps(val, _mm512_maskz_compress_ps(hit, v));
  _mm512_storeu_si512(idx, _mm512_maskz_compress_epi32(hit, ids));
  return __builtin_popcount(hit);
}

}  // namespace

int64_t collect_above_avx512(const void* x, DType t, int64_t n, float thr, int32_t base, float* val, int32_t* idx) {
  const __m512 tv = _mm512_set1_ps(thr);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t count = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 v0 = load16(x, t, i, 0xFFFF), v1 = load16(x, t, i + 16, 0xFFFF);
    const __m512 v2 = load16(x, t, i + 32, 0xFFFF), v3 = load16(x, t, i + 48, 0xFFFF);
    // Ordered greater-than: false for NaN, so NaN logits never become candidates.
    const __mmask16 h0 = _mm512_cmp_ps_mask(v0, tv, _CMP_GT_OQ), h1 = _mm512_cmp_ps_mask(v1, tv, _CMP_GT_OQ);
    const __mmask16 h2 = _mm512_cmp_ps_mask(v2, tv, _CMP_GT_OQ), h3 = _mm512_cmp_ps_mask(v3, tv, _CMP_GT_OQ);
    if (__builtin_expect((h0 | h1 | h2 | h3) == 0, 1)) continue;
    const __m512i ids = _mm512_add_epi32(lane, _mm512_set1_epi32(base + int32_t(i)));
    count += append(v0, h0, ids, val + count, idx + count);
    count += append(v1, h1, _mm512_add_epi32(ids, _mm512_set1_epi32(16)), val + count, idx + count);
    count += append(v2, h2, _mm512_add_epi32(ids, _mm512_set1_epi32(32)), val + count, idx + count);
    count += append(v3, h3, _mm512_add_epi32(ids, _mm512_set1_epi32(48)), val + count, idx + count);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = load16(x, t, i, m);
    const __mmask16 h = _mm512_mask_cmp_ps_mask(m, v, tv, _CMP_GT_OQ);
    if (h) count += append(v, h, _mm512_add_epi32(lane, _mm512_set1_epi32(base + int32_t(i))), val + count, idx + count);
  }
  return count;
}

// With u the floats as unsigned order keys (negative floats' magnitude bits flipped, sign bit
// flipped), the k-th largest key is the largest U with at least k keys >= U; built from the top
// bit down, keeping each bit when enough keys reach the prefix: 32 passes, each a compare and a
// masked add per 16 keys, no data-dependent branch.
float kth_largest_avx512(const float* v, int64_t n, int64_t k) {
  auto key_of = [](__m512 x) {
    const __m512i b = _mm512_castps_si512(x);
    const __m512i flip = _mm512_or_si512(_mm512_srli_epi32(_mm512_srai_epi32(b, 31), 1), _mm512_set1_epi32(INT32_MIN));
    return _mm512_xor_si512(b, flip);  // negative: all bits flipped; else: the sign bit set
  };
  uint32_t u = 0;
  const __m512i one = _mm512_set1_epi32(1);
  for (int bit = 31; bit >= 0; --bit) {
    const uint32_t cand = u | (1u << bit);
    const __m512i cv = _mm512_set1_epi32(int32_t(cand));
    __m512i count = _mm512_setzero_si512();
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      const __mmask16 ge = _mm512_mask_cmpge_epu32_mask(m, key_of(_mm512_maskz_loadu_ps(m, v + i)), cv);
      count = _mm512_mask_add_epi32(count, ge, count, one);
    }
    if (_mm512_reduce_add_epi32(count) >= k) u = cand;
  }
  const uint32_t bits = u & 0x80000000u ? u ^ 0x80000000u : ~u;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

}  // namespace sol::kernels
