#pragma once
// The norms' sum order at AVX2 (kernels/norm.h): which of the 64 partial sums element i goes
// into, their combination, and a block of 64 loaded as eight vectors in partial-sum order.
// Include only from *_avx2.cc files; everything is in an anonymous namespace.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/x86/avx2/pair_avx2.h"
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

// Chunk q (elements 16q..16q+15, q = 2h + c) of a bf16 block in partial-sum order: its even
// elements to vector 4h + c (partial sums 16 (2h) + 8c..), its odd ones to 4h + 2 + c.
[[gnu::always_inline]] inline void place_chunk(__m256i z, int q, __m256 (&v)[8]) {
  const Pair8 p = split_bf16x16(z);
  v[4 * (q / 2) + q % 2] = p.even;
  v[4 * (q / 2) + 2 + q % 2] = p.odd;
}

// The 64 elements of the block at i as eight vectors in partial-sum order.
template <DType T>
[[gnu::always_inline]] inline void load_block64(const void* x, int64_t i, __m256 (&v)[8]) {
  if constexpr (T == DType::f32) {
    const float* p = static_cast<const float*>(x) + i;
#pragma GCC unroll 8
    for (int a = 0; a < 8; ++a) v[a] = _mm256_loadu_ps(p + 8 * a);
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(x) + i;
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) place_chunk(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * q)), q, v);
  }
}

// A bf16 row's sum of squares, in sum_squares' partial sums: block(v) per block of 64 in
// partial-sum order, spill() after the last, one(j, x[j]) for each element of the tail.
struct SquareSums {
  __m256 acc[8];
  float part[64];
  SquareSums() {
    for (__m256& a : acc) a = _mm256_setzero_ps();
  }
  [[gnu::always_inline]] void block(const __m256 (&v)[8]) {
#pragma GCC unroll 8
    for (int a = 0; a < 8; ++a) acc[a] = _mm256_fmadd_ps(v[a], v[a], acc[a]);
  }
  void spill() {
    for (int a = 0; a < 8; ++a) _mm256_storeu_ps(part + 8 * a, acc[a]);
  }
  void one(int64_t j, float v) {
    float& p = part[partial(j, DType::bf16)];
    p = std::fma(v, v, p);
  }
};

}  // namespace
}  // namespace sol::kernels
