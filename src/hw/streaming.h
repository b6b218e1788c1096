#pragma once
// Whether an op writing `bytes` should use non-temporal stores: only when the output cannot
// stay in the last-level cache anyway, so bypassing it costs nothing and saves the RFO reads.
// The threshold is the tuning context's stream_min_bytes (the smaller of LLC/2 and 4 x L2 unless
// `sol tune` moved it).
#include <cstdint>

#include "sol/tuning.h"

namespace sol {
// `tp`: the tuning an op read once at its entry (the thread's context when not given).
inline bool should_stream(int64_t bytes, const TuningParams& tp = tuning().params) {
  return bytes >= tp.stream_min_bytes;
}
}  // namespace sol
