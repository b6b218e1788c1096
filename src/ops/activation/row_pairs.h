#pragma once
// The order in which a thread visits its rows when a kernel takes two rows per call (the
// activations, softmax, embedding): row r0 + k with row r0 + half + k, half the range apart.
// Two rows read in turn are two independent DRAM streams, which this machine reads ~10-20%
// faster than one when they lie far apart (and slower when they are neighbours, 14 KiB apart):
// docs/perf/layer-ops.md.
#include <cstdint>

namespace sol {

// pair(a, b) for k in [0, half): a = r0 + k, b = a + half; then single(r1 - 1) when the count
// is odd. Every row of [r0, r1) exactly once.
template <class Pair, class Single>
void for_row_pairs(int64_t r0, int64_t r1, Pair&& pair, Single&& single) {
  const int64_t half = (r1 - r0) / 2;
  for (int64_t k = 0; k < half; ++k) pair(r0 + k, r0 + half + k);
  if ((r1 - r0) % 2 != 0) single(r1 - 1);
}

}  // namespace sol
