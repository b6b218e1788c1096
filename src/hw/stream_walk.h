#pragma once
// The walk the streaming ceiling loops share, whatever the vector width: the AVX-512 and AVX2
// loops must interleave their streams the same way, or their ceilings would measure different
// things. The caller's lambda does the loads and stores of one 64-byte line. Everything here has
// internal linkage, so each loop file keeps its own copy, compiled with its own ISA flags: no
// AVX-512 code can stand in for the AVX2 loops at link time.
#include <immintrin.h>

#include <cstddef>
#include <type_traits>

#include "hw/ceiling_loops.h"
#include "sol/error.h"

namespace sol::ceiling_loops {
namespace {

// Stops the compiler from treating repeated passes of identical stores as redundant.
inline void compiler_barrier() { __asm__ volatile("" : : : "memory"); }

// With S streams the array is cut into S equal parts of whole blocks, and each trip takes 8/S
// lines from every part in turn: one core's DRAM read is bound by the misses it keeps in flight,
// and the hardware prefetchers keep more of them in flight for several streams than for one.
// line(k, slot, pass) gets the line's first float k and its slot 0..7 in the trip. kFence: an
// sfence after each pass (streaming stores are weakly ordered; finish them inside the timing).
// Returns the floats walked.
template <int S, bool kFence, class Line>
[[gnu::always_inline]] inline double walk_streams(size_t floats, long passes, const Line& line) {
  constexpr int kLines = 8 / S;
  const size_t per = floats / S / kStreamBlockFloats * kStreamBlockFloats;
  for (long p = 0; p < passes; ++p) {
    for (size_t i = 0; i < per; i += 16 * kLines) {
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s)
#pragma GCC unroll 8
        for (int j = 0; j < kLines; ++j) line(s * per + i + 16 * j, s * kLines + j, p);
    }
    if constexpr (kFence) _mm_sfence();
    compiler_barrier();
  }
  return double(passes) * double(per * S);
}

// f(std::integral_constant<int, S>) for the built stream counts S (kStreamChoices).
template <class F>
double with_streams(int streams, const F& f) {
  switch (streams) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 8: return f(std::integral_constant<int, 8>{});
  }
  fail("stream loop", "no loop built for ", streams, " streams");
}

}  // namespace
}  // namespace sol::ceiling_loops
