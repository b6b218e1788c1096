// AVX2 members of the quantization table's portable route (abs-max, scaling, dequantization's
// scaling): the scalar kernels' bits, eight lanes at a time. A maximum is exact in any order;
// products are one rounding each; e4m3 widens through codes_avx2.h, bit for bit
// src/core/convert.cc (the route's bulk conversion is convert_avx2, quant_table.cc).

#include <immintrin.h>

#include <cmath>

#include "kernels/quant.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {

namespace {

float load_f32(const void* x, DType t, int64_t i) {
  if (t == DType::bf16) return bf16_to_f32(static_cast<const uint16_t*>(x)[i]);
  return static_cast<const float*>(x)[i];
}

// A NaN code times a NaN scale: the code's NaN, as the reference's product gives it. Which NaN
// a vmulps of two NaNs returns follows its operand order, which the compiler may swap (it did
// between the -O3 and the sanitizers' -O1 builds), so the code's NaN is selected explicitly.
[[gnu::always_inline]] inline __m256 code_times_scale(__m256 v, __m256 scale) {
  return _mm256_blendv_ps(_mm256_mul_ps(v, scale), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

}  // namespace

float abs_max_avx2(const void* x, DType t, int64_t n) {
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
  __m256 nan = _mm256_setzero_ps();  // all ones in a lane that saw a NaN
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_and_ps(load8(x, t, i), magnitude), b = _mm256_and_ps(load8(x, t, i + 8), magnitude);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    m0 = _mm256_max_ps(m0, a);
    m1 = _mm256_max_ps(m1, b);
  }
  if (!_mm256_testz_ps(nan, nan)) return __builtin_nanf("");  // one NaN pattern in every path
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(m0, m1));
  float m = 0.0f;
  for (float v : lanes) m = v > m ? v : m;
  for (; i < n; ++i) {
    const float v = std::fabs(load_f32(x, t, i));
    if (std::isnan(v)) return __builtin_nanf("");
    m = v > m ? v : m;
  }
  return m;
}

void scale_to_f32_avx2(const void* x, DType t, float m, float* out, int64_t n) {
  const __m256 s = _mm256_set1_ps(m);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_mul_ps(load8(x, t, i), s));
  for (; i < n; ++i) out[i] = load_f32(x, t, i) * m;
}

void dequant_scale_avx2(const uint8_t* q, float s, float* out, int64_t n) {
  const __m256 scale = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 low, high;
    e4m3x16_to_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)), low, high);
    _mm256_storeu_ps(out + i, code_times_scale(low, scale));
    _mm256_storeu_ps(out + i + 8, code_times_scale(high, scale));
  }
  for (; i < n; ++i) {
    const float v = e4m3_to_f32(q[i]);
    out[i] = std::isnan(v) ? v : v * s;
  }
}

}  // namespace sol::kernels
