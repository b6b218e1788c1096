#pragma once
// Exact e4m3 -> bf16 widening, 32 values at a time: shared by the bulk conversion kernel and the
// GEMM micro-kernel that reads fp8 weights directly. Included only by AVX-512 translation units;
// everything stays in an anonymous namespace so no baseline code can link to it.
// GCC 12's own _mm512_undefined_* helpers trip -Wuninitialized once inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "kernels/e4m3_bf16_table.h"

namespace sol::kernels {
namespace {

// 32 e4m3 bytes -> 32 bf16, by table.
[[gnu::always_inline]] inline __m512i e4m3x32_to_bf16(__m256i bytes) {
  const auto* table = reinterpret_cast<const __m512i*>(kE4m3ToBf16.bits);
  const __m512i byte = _mm512_cvtepu8_epi16(bytes);
  // vpermt2w reads the low 6 index bits; bit 6 picks the table half; bit 7 is the sign.
  const __m512i low = _mm512_permutex2var_epi16(table[0], byte, table[1]);
  const __m512i high = _mm512_permutex2var_epi16(table[2], byte, table[3]);
  const __m512i magnitude =
      _mm512_mask_blend_epi16(_mm512_test_epi16_mask(byte, _mm512_set1_epi16(0x40)), low, high);
  // magnitude | (byte << 8 & 0x8000)
  return _mm512_ternarylogic_epi32(magnitude, _mm512_slli_epi16(byte, 8), _mm512_set1_epi16(short(0x8000)), 0xF8);
}

}  // namespace
}  // namespace sol::kernels
