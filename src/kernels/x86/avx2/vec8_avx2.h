#pragma once
// Eight-lane f32 helpers shared by the AVX2 row kernels: f32 or bf16 elements loaded as f32,
// f32 stored as f32 or as bf16 (rounded as f32_to_bf16, codes_avx2.h), whole vectors or a
// row's last 1-7 elements. Include only from
// *_avx2.cc files; everything is in an anonymous namespace, so no baseline code can link to an
// AVX2 build of it.
#include <immintrin.h>

#include <cstdint>

#include "kernels/x86/avx2/codes_avx2.h"
#include "sol/dtype.h"

namespace sol::kernels {
namespace {

// 8 bf16 codes -> 8 f32 (exact).
[[gnu::always_inline]] inline __m256 widen8_bf16(const uint16_t* p) {
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

// 8 f32 -> 8 bf16 codes in order: the codes sit in the low halves of 32-bit lanes, packus works
// per 128-bit lane, so quarters 0 and 2 hold them.
[[gnu::always_inline]] inline __m128i narrow8_bf16(__m256 v) {
  const __m256i codes = f32x8_to_bf16(v);
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(codes, codes), 0x08));
}

// Elements i..i+7 of a row of type t (f32 or bf16), as f32.
[[gnu::always_inline]] inline __m256 load8(const void* p, DType t, int64_t i) {
  if (t == DType::f32) return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  return widen8_bf16(static_cast<const uint16_t*>(p) + i);
}

[[gnu::always_inline]] inline void store8(void* p, DType t, int64_t i, __m256 v) {
  if (t == DType::f32) _mm256_storeu_ps(static_cast<float*>(p) + i, v);
  else _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(p) + i), narrow8_bf16(v));
}

// The last 1-7 elements of a row (count of them, at i): loaded through a zero-padded copy and
// stored through one, so nothing outside the row is read or written.
[[gnu::always_inline]] inline __m256 load8_n(const void* p, DType t, int64_t i, int64_t count) {
  const size_t size = t == DType::f32 ? 4 : 2;
  alignas(32) unsigned char padded[32] = {};
  __builtin_memcpy(padded, static_cast<const unsigned char*>(p) + size_t(i) * size, size_t(count) * size);
  return load8(padded, t, 0);
}

[[gnu::always_inline]] inline void store8_n(void* p, DType t, int64_t i, int64_t count, __m256 v) {
  const size_t size = t == DType::f32 ? 4 : 2;
  alignas(32) unsigned char padded[32];
  store8(padded, t, 0, v);
  __builtin_memcpy(static_cast<unsigned char*>(p) + size_t(i) * size, padded, size_t(count) * size);
}

}  // namespace
}  // namespace sol::kernels
