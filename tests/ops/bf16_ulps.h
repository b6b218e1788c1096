#pragma once
// bf16 results against an fp64 reference, counted in ulps: the correctly rounded bf16 of a
// double, and the distance between two bf16 values on a line that counts ulps across zero
// (+0 and -0 both at 0), so "within 1 ulp" holds across a sign change too.
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "sol/dtype.h"

namespace sol::testing_bf16 {

// Round to nearest: the f32 rounding first, then the neighbours of its bf16 rounding compared
// with the double itself, so a double rounding through f32 cannot pick the wrong side.
inline uint16_t bf16_rounded(double r) {
  const uint16_t b = f32_to_bf16(float(r));
  uint16_t best = b;
  for (int d : {-1, 1}) {
    const uint16_t c = uint16_t(b + d);
    const double x = bf16_to_f32(c);
    if (std::isfinite(x) && std::fabs(x - r) < std::fabs(double(bf16_to_f32(best)) - r)) best = c;
  }
  return best;
}

inline int32_t bf16_ulp_index(uint16_t b) { return (b & 0x8000) ? -int32_t(b & 0x7FFF) : int32_t(b); }

inline int32_t bf16_ulps_apart(uint16_t a, uint16_t b) { return std::abs(bf16_ulp_index(a) - bf16_ulp_index(b)); }

}  // namespace sol::testing_bf16
