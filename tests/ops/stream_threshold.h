#pragma once
// Tests of the streamed (non-temporal store) loops. An op streams an output of at least the
// tuning's stream_min_bytes (src/hw/streaming.h), the smaller of half the LLC and 4 x L2 by
// default, or whatever `sol tune` chose: a test sized past it could push GBs through fp64
// references. A LowStreamThreshold in scope lowers the
// threshold to kStreamBytes, so the same loops run over outputs of a few MiB on every machine.
// The default threshold itself is tested in tests/hw/test_tuning.cc.
#include <cstdint>

#include "sol/tuning.h"

namespace sol::testing_stream {

inline constexpr int64_t kStreamBytes = int64_t(2) << 20;

class LowStreamThreshold {
 public:
  LowStreamThreshold() : scope_(lowered()) {}

 private:
  static TuningParams lowered() {
    TuningParams p = tuning().params;
    p.stream_min_bytes = kStreamBytes;
    return p;
  }
  ScopedTuning scope_;
};

}  // namespace sol::testing_stream
