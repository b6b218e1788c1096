#pragma once
// The workloads `sol tune` times each parameter on: real op calls, one thread, sized so that each parameter's choice matters (several K blocks, chunks, sizes on
// both sides of the streaming threshold). They live in ops because they call ops; the timing
// and the cache are hw's (sol/tuning.h).
#include <memory>
#include <string>
#include <vector>

#include "sol/tuning.h"

namespace sol {

// The inputs of every case, allocated once and filled with random data.
struct TuneWorkspace;

struct TuneCases {
  std::shared_ptr<TuneWorkspace> inputs;  // owned by the cases' closures too
  std::vector<TuneCase> cases;            // in the order `sol tune` runs them
};

// The values `sol tune` tries for a parameter (besides the default); throws for an unknown name.
// tests/hw/test_tuning_bits.cc forces each of them.
std::vector<int64_t> tune_candidates(const std::string& param);

// The cases of `family` ("gemm", "stream", "softmax", "rows"; empty: all).
TuneCases tune_cases(const std::string& family = "");

}  // namespace sol
