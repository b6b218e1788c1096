// The core clock, from a chain of dependent integer adds: each must wait one cycle for the
// previous one, so cycles = adds.
#include <cstdint>

#include "hw/ceiling_loops.h"

namespace sol::ceiling_loops {

double clock_cycles(long iterations) {
  constexpr int kAddsPerIteration = 200;  // the loop's dec/jnz runs beside the chain, hidden
  if (iterations <= 0) return 0;
  uint64_t sum = 0;
  uint64_t step = 1;
  long remaining = iterations;
  // Register + register on purpose: Golden Cove-class cores fold chains of add-immediate at
  // rename and would report more than one add per cycle.
  __asm__ volatile(
      "1:\n\t"
      ".rept 200\n\t"
      "add %[step], %[sum]\n\t"
      ".endr\n\t"
      "dec %[remaining]\n\t"
      "jnz 1b"
      : [sum] "+r"(sum), [remaining] "+r"(remaining)
      : [step] "r"(step)
      : "cc");
  return double(iterations) * kAddsPerIteration;
}

}  // namespace sol::ceiling_loops
