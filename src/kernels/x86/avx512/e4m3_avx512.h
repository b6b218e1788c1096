#pragma once
// Exact e4m3 -> bf16 widening, 32 values at a time: shared by the bulk conversion kernel and the
// GEMM micro-kernel that reads fp8 weights directly. Included only by AVX-512 translation units;
// everything stays in an anonymous namespace so no baseline code can link to it.
#include <immintrin.h>

#include <cstdint>

namespace sol::kernels {
namespace {

// bf16 bits of every e4m3 magnitude 0..127. bf16 holds each e4m3 value exactly; 0x7F, the NaN,
// becomes 0x7FF0, what the route through f32 gives (src/core/convert.cc).
struct alignas(64) E4m3ToBf16Table {
  uint16_t bits[128];
};

constexpr E4m3ToBf16Table make_e4m3_to_bf16_table() {
  E4m3ToBf16Table t{};
  for (int m = 0; m < 128; ++m) {
    const int exponent = m >> 3, mantissa = m & 7;
    if (m == 0x7F) {
      t.bits[m] = 0x7FF0;
    } else if (exponent > 0) {
      t.bits[m] = uint16_t(((exponent - 7 + 127) << 7) | (mantissa << 4));
    } else if (mantissa > 0) {
      // mantissa * 2^-9: shift the leading one up to bit 3, where it becomes the implicit bit.
      int shift = 0;
      while ((mantissa << shift) < 8) ++shift;
      t.bits[m] = uint16_t(((127 - 6 - shift) << 7) | (((mantissa << shift) & 7) << 4));
    }
  }
  return t;
}

constexpr E4m3ToBf16Table kE4m3ToBf16 = make_e4m3_to_bf16_table();

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
