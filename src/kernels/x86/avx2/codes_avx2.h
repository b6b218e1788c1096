#pragma once
// AVX2 code conversions shared by the conversion kernels (convert_avx2.cc) and the AVX2 GEMM
// (gemm_*_avx2.cc), bit for bit src/core/convert.cc's. Include only from *_avx2.cc files;
// everything is in an anonymous namespace so no baseline code can link to it.
#include <immintrin.h>

namespace sol::kernels {
namespace {

// 16 e4m3 -> two groups of 8 f32. With the bits moved under the f16 fields, an e4m3 code reads
// as an f16 of its value times 2^-8 (bias 15 instead of 7), subnormals included; vcvtph2ps
// and an exact scaling by 2^8 finish the job.
[[gnu::always_inline]] inline void e4m3x16_to_f32(__m128i b, __m256& low, __m256& high) {
  const __m256i byte = _mm256_cvtepu8_epi16(b);
  const __m256i magnitude = _mm256_slli_epi16(_mm256_and_si256(byte, _mm256_set1_epi16(0x7F)), 7);
  const __m256i sign =
      _mm256_and_si256(_mm256_slli_epi16(byte, 8), _mm256_set1_epi16(short(0x8000)));
  // The NaN code lands on 0x3F80 (1.875); 0x7F80 is the f16 NaN that widens to 0x7FF00000.
  const __m256i nan = _mm256_cmpeq_epi16(magnitude, _mm256_set1_epi16(0x3F80));
  const __m256i half = _mm256_or_si256(
      _mm256_or_si256(magnitude, sign), _mm256_and_si256(nan, _mm256_set1_epi16(0x7F80)));
  // The product is exact, and a NaN operand comes through unchanged.
  const __m256 scale = _mm256_set1_ps(256.0f);
  low = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(half)), scale);
  high = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(half, 1)), scale);
}

// 8 f32 -> 8 bf16 codes, one per 32-bit lane: round half to even, NaN made quiet.
[[gnu::always_inline]] inline __m256i f32x8_to_bf16(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
  // Round half to even: add half-minus-one plus the lowest kept bit; carries reach inf.
  const __m256i lowest_kept = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), lowest_kept), 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x0040));
  // magnitude <= 0x7FFFFFFF, so the signed compare is an unsigned one.
  return _mm256_blendv_epi8(rounded, quiet_nan, _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7F800000)));
}

}  // namespace
}  // namespace sol::kernels
