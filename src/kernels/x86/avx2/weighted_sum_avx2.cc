// out = sum_j w[j] rows[j] over bf16 rows, accumulated in f32 in the order given, rounded once
// to bf16, eight lanes at a time: multiply then add, contraction off in this file (GCC would
// fuse the two), so the bits are the portable loop's.
#pragma GCC optimize("fp-contract=off")
#include <immintrin.h>

#include <cstring>

#include "kernels/weighted_sum.h"
#include "kernels/x86/avx2/codes_avx2.h"

namespace sol::kernels {

namespace {

[[gnu::always_inline]] inline __m256 widen8(const uint16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

[[gnu::always_inline]] inline __m128i narrow8(__m256 v) {
  const __m256i codes = f32x8_to_bf16(v);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(codes, codes), 0x08));
}

}  // namespace

void weighted_sum_bf16_avx2(uint16_t* out, const uint16_t* const* rows, const float* weights, int count, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int j = 0; j < count; ++j) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(weights[j]), widen8(rows[j] + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), narrow8(acc));
  }
  if (i == n) return;
  // The last 1-7 columns through padded copies.
  const size_t left = size_t(n - i);
  alignas(16) uint16_t in[8] = {}, result[8];
  __m256 acc = _mm256_setzero_ps();
  for (int j = 0; j < count; ++j) {
    std::memcpy(in, rows[j] + i, left * 2);
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(weights[j]), widen8(in)));
  }
  _mm_store_si128(reinterpret_cast<__m128i*>(result), narrow8(acc));
  std::memcpy(out + i, result, left * 2);
}

}  // namespace sol::kernels
