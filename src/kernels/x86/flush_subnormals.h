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
  // The caller's modes back; the exception flags raised meanwhile stay raised, as they would.
  ~FlushSubnormals() { _mm_setcsr((saved_ & ~kFlags) | (_mm_getcsr() & kFlags)); }
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  static constexpr unsigned kFlags = 0x3Fu;  // MXCSR's sticky exception flags
  unsigned saved_;
};

}  // namespace sol::kernels
