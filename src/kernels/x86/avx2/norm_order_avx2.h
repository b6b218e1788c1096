#pragma once
// The norms' sum order at AVX2 (kernels/norm.h): which of the 64 partial sums element i goes
// into, their combination, and a block of 64 loaded as eight vectors in partial-sum order.
// Include only from *_avx2.cc files; everything is in an anonymous namespace.
#include <immintrin.h>

#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {
namespace {

// kernels/norm.h's partial sum of element i.
inline int64_t partial(int64_t i, DType t) {
  const int64_t j = i % 64;
  if (t != DType::bf16) return j;
  return 16 * (2 * (j / 32) + j % 2) + (j % 32) / 2;
}

inline float combine(const float (&part)[64]) {
  float s = 0;
  for (int k = 0; k < 16; ++k) s += (part[k] + part[16 + k]) + (part[32 + k] + part[48 + k]);
  return s;
}

// The 64 elements of the block at i as eight vectors in partial-sum order. bf16: each 16
// elements at 32h + 16c widen to their even elements (partial sums 16 (2h) + 8c..) and odd
// ones (16 (2h + 1) + 8c..) by one shift and one and.
template <DType T>
[[gnu::always_inline]] inline void load_block64(const void* x, int64_t i, __m256 (&v)[8]) {
  if constexpr (T == DType::f32) {
    const float* p = static_cast<const float*>(x) + i;
#pragma GCC unroll 8
    for (int a = 0; a < 8; ++a) v[a] = _mm256_loadu_ps(p + 8 * a);
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(x) + i;
    const __m256i high = _mm256_set1_epi32(int(0xFFFF0000u));
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {  // q = 2h + c
      const __m256i z = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * q));
      const int h = q / 2, c = q % 2;
      v[4 * h + c] = _mm256_castsi256_ps(_mm256_slli_epi32(z, 16));
      v[4 * h + 2 + c] = _mm256_castsi256_ps(_mm256_and_si256(z, high));
    }
  }
}

}  // namespace
}  // namespace sol::kernels
