// AVX-512 row primitives of the norms. Helpers stay in the anonymous namespace (see
// quant_avx512.cc for why).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "kernels/norm.h"

namespace sol::kernels {

namespace {

[[gnu::always_inline]] inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
}

[[gnu::always_inline]] inline __m512 load16(const void* p, DType t, int64_t i, __mmask16 m) {
  if (t == DType::bf16) {
    __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
}

// f32 -> bf16, round to nearest even, in integer arithmetic: vcvtneps2bf16 flushes subnormal
// inputs to zero on this hardware, and the result must match sol::f32_to_bf16 exactly.
[[gnu::always_inline]] inline __m256i to_bf16(__m512 v) {
  __m512i b = _mm512_castps_si512(v);
  __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

[[gnu::always_inline]] inline void store16(void* p, DType t, int64_t i, __mmask16 m, __m512 v) {
  if (t == DType::bf16) _mm256_mask_storeu_epi16(static_cast<uint16_t*>(p) + i, m, to_bf16(v));
  else _mm512_mask_storeu_ps(static_cast<float*>(p) + i, m, v);
}

}  // namespace

float sum_squares_avx512(const void* x, DType t, int64_t n) {
  // One 16-lane accumulator in the same lane order as the scalar path; the FMA latency is hidden
  // by the loads and conversions around it at memory speed.
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    __m512 v = load16(x, t, i, tail_mask(n - i));
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  alignas(64) float part[16];
  _mm512_store_ps(part, acc);
  float s = 0;
  for (float p : part) s += p;
  return s;
}

void scale_by_weight_avx512(const void* x, DType xt, float inv, const void* w, DType wt, void* y,
                            DType yt, int64_t n) {
  const __m512 iv = _mm512_set1_ps(inv);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    store16(y, yt, i, m, _mm512_mul_ps(_mm512_mul_ps(load16(x, xt, i, m), iv), load16(w, wt, i, m)));
  }
}

void add_into_avx512(const void* x, DType xt, void* r, DType rt, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    store16(r, rt, i, m, _mm512_add_ps(load16(r, rt, i, m), load16(x, xt, i, m)));
  }
}

}  // namespace sol::kernels
