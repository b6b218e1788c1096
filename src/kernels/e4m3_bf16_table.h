#pragma once
// The exact e4m3 -> bf16 mapping as a table of the 128 magnitudes, built at compile time. Plain
// C++, so the packing code and the AVX-512 widening (x86/avx512/e4m3_avx512.h, which looks it up
// with vpermt2w) use the same bits, NaN included.
#include <cstdint>

namespace sol::kernels {

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

inline constexpr E4m3ToBf16Table kE4m3ToBf16 = make_e4m3_to_bf16_table();

// bf16 bits of all 256 codes (the magnitude's entry with the sign moved to bit 15), for scalar
// code that converts one element at a time: one load per element.
struct E4m3ToBf16Codes {
  uint16_t bits[256];
};
constexpr E4m3ToBf16Codes make_e4m3_codes_to_bf16() {
  E4m3ToBf16Codes t{};
  for (int code = 0; code < 256; ++code) t.bits[code] = uint16_t(kE4m3ToBf16.bits[code & 0x7F] | (code & 0x80) << 8);
  return t;
}
inline constexpr E4m3ToBf16Codes kE4m3CodesToBf16 = make_e4m3_codes_to_bf16();

}  // namespace sol::kernels
