#pragma once
// Every byte of an int8 or e4m3 operand from a seeded 64-bit LCG: the whole byte range. For
// int8 the extremes (-128, 127 and, as u8, 255) are forced into the first three bytes; for e4m3
// the NaN codes (0x7F, 0xFF) become the largest finite ones.
#include <cstdint>

#include "sol/tensor.h"

namespace sol {

inline void fill_bytes(const Tensor& t, uint64_t seed, bool e4m3 = false) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto* p = static_cast<uint8_t*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint8_t v = uint8_t(x >> 56);
    if (e4m3 && (v & 0x7F) == 0x7F) v = uint8_t(v - 1);
    p[i] = v;
  }
  if (!e4m3 && t.numel() > 2) {
    p[0] = 0x80;
    p[1] = 0x7F;
    p[2] = 0xFF;
  }
}

}  // namespace sol
