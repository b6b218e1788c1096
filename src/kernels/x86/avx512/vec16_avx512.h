#pragma once
// 16-lane f32 helpers shared by the AVX-512 row kernels: masked loads of f32 or bf16 widened to
// f32, exact f32 -> bf16 rounding, masked stores. Include only from *_avx512.cc files. Everything
// is in an anonymous namespace, so each translation unit has its own copy and the linker can
// never hand baseline code an AVX-512 build of a shared inline function.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {
namespace {

[[gnu::always_inline]] inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
}

// 16 elements as f32; bf16 widens exactly by a 16-bit shift.
[[gnu::always_inline]] inline __m512 load16(const void* p, DType t, int64_t i, __mmask16 m) {
  if (t == DType::bf16) {
    __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
}

// f32 -> bf16, round to nearest even, in integer arithmetic: vcvtneps2bf16 flushes subnormal
// inputs to zero on Zen 5, and the result must equal sol::f32_to_bf16 (NaN: quiet bit set).
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
}  // namespace sol::kernels
