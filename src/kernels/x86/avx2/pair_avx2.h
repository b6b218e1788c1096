#pragma once
// bf16 pairs at AVX2: 16 bf16 (32 bytes) as their 8 even and 8 odd values in f32 (one shift and
// one and, no shuffle), and 8 even and 8 odd f32 results back as the 16 bf16 codes in element
// order (one integer rounding pass, no shuffle either). Include only from *_avx2.cc files;
// everything is in an anonymous namespace.
#include <immintrin.h>

#include <cstdint>

namespace sol::kernels {
namespace {

struct Pair8 {
  __m256 even, odd;
};

[[gnu::always_inline]] inline Pair8 split_bf16x16(__m256i w) {
  return {_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)),
          _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32(int(0xFFFF0000u))))};
}

[[gnu::always_inline]] inline Pair8 load_bf16x16(const uint16_t* p) {
  return split_bf16x16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// f32 bits rounded to bf16 (half to even) in the high half of each lane: f32_to_bf16 for every
// value but a NaN with any of its low 16 bits set.
[[gnu::always_inline]] inline __m256i rounded_high(__m256 v) {
  const __m256i b = _mm256_castps_si256(v);
  const __m256i lowest_kept = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7FFF)), lowest_kept);
}

// Eight pairs' results as 16 bf16 codes: word j = odd code << 16 | even code. Exact (as
// f32_to_bf16) only when every NaN among the results has its low 16 bits zero: callers whose
// operands are bf16 values and finite or bf16-derived f32 factors have only such NaNs (x86
// arithmetic returns an operand's NaN, quieted, or the default NaN; neither adds low bits), and
// rounding then adds no carry and keeps the quiet bit f32_to_bf16 sets.
[[gnu::always_inline]] inline __m256i bf16_pairs(__m256 even, __m256 odd) {
  return _mm256_or_si256(_mm256_srli_epi32(rounded_high(even), 16),
                         _mm256_and_si256(rounded_high(odd), _mm256_set1_epi32(int(0xFFFF0000u))));
}

}  // namespace
}  // namespace sol::kernels
