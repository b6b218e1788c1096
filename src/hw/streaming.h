#pragma once
// Whether an op writing `bytes` should use non-temporal stores: only when the output cannot
// stay in the last-level cache anyway, so bypassing it costs nothing and saves the RFO reads.
#include <cstdint>

#include "sol/hw.h"

namespace sol {
inline bool should_stream(int64_t bytes) {
  long llc = cpu_features().l3_bytes > 0 ? cpu_features().l3_bytes : (16L << 20);
  return bytes >= llc / 2;
}
}  // namespace sol
