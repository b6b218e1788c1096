#pragma once
// The 64-bit finalizer (MurmurHash3's fmix64) the sol::ep tests derive their routing from: a
// well-spread hash of (rank, token, choice) lets every rank recompute any other rank's routing.
#include <cstdint>

namespace sol::ep::testing {

inline uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}

}  // namespace sol::ep::testing
