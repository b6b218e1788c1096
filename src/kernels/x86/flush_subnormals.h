#pragma once
// Flush-to-zero and denormals-are-zero for one scope of this thread (MXCSR is per thread).
// On Intel cores a vector op that makes or reads an f32 subnormal takes a microcode assist of
// ~100+ cycles; Zen does not. Only for kernels whose outputs cannot change by it: a subnormal
// there must end as a zero of the same sign whichever way it is computed (an fp8 code far under
// e4m3's half-ulp, say). Set once per row or call: ldmxcsr / stmxcsr are slow beside a vector op.
#include <xmmintrin.h>

namespace sol::kernels {

class FlushSubnormals {
 public:
  FlushSubnormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~FlushSubnormals() { _mm_setcsr(saved_); }
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  unsigned saved_;
};

}  // namespace sol::kernels
