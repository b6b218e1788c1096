#pragma once
// kernels/cuda/device_exp_math.cuh's exponential and sigmoid, eight lanes at a time and bit for
// bit: each step is the same single IEEE operation (the product rounded before rint, the
// Cody-Waite reduction and the degree-6 polynomial in explicit FMAs, p * 2^n as two exact-or-
// once-rounded multiplies), so routing scores agree with the scalar path and the device.
// Include only from *_avx2.cc files; everything is in an anonymous namespace.
#include <immintrin.h>

namespace sol::kernels {
namespace {

// 2^e for normal exponents e in [-126, 127], per lane.
[[gnu::always_inline]] inline __m256 pow2_normal8(__m256i e) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}

// sol_cuda::exp_f32: x clamped to [-104, 89], NaN returned as itself.
[[gnu::always_inline]] inline __m256 exp8(__m256 in) {
  const __m256 nan = _mm256_cmp_ps(in, in, _CMP_UNORD_Q);
  // max_ps and min_ps return their second operand for a NaN, which the last blend replaces.
  const __m256 x = _mm256_min_ps(_mm256_max_ps(in, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);  // n is a whole number: exact
  const __m256i h = _mm256_srai_epi32(ni, 1);
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(p, pow2_normal8(_mm256_sub_epi32(ni, h))), pow2_normal8(h));
  return _mm256_blendv_ps(e, in, nan);
}

// sol_cuda::sigmoid_f32: 1 / (1 + exp(0 - x)).
[[gnu::always_inline]] inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

}  // namespace
}  // namespace sol::kernels
