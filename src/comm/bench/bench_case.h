#pragma once
// One op at one size, ready to time: the Sol call, Open MPI's equivalent on the same
// buffers, and a check that counts wrong elements of the last result.
#include <functional>
#include <memory>
#include <vector>

#include "comm/group_state.h"
#include "sol/comm_bench.h"

namespace sol::comm::detail {

struct BenchCase {
  int64_t count = 0;                 // elements in the record's `bytes`
  std::function<void()> run_sol;
  std::function<void()> run_mpi;     // empty: no MPI equivalent (e.g. bf16)
  std::function<void()> poison;      // overwrite outputs before a checked run
  std::function<int64_t()> wrong;    // elements of this rank's output that are not as expected
  std::vector<std::vector<std::byte>> owned;  // private buffers, when not in the heap
};

// Buffers come from the group's heap (caller resets it afterwards) or private memory.
std::unique_ptr<BenchCase> make_bench_case(const Group& group, const CommBenchOptions& options, size_t bytes);

}  // namespace sol::comm::detail
