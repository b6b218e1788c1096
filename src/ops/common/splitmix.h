#pragma once
// SplitMix64's finaliser: a stateless 64-bit hash, so (seed, index) gives the same random bits
// on any thread count (benchmark fills, the sampling generator).
#include <cstdint>

namespace sol {
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace sol
