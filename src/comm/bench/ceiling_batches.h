#pragma once
// The timing both copy-style ceilings of the comm bench share (copy_ceiling.cc, ep_ceiling.cc):
// `batches` rounds in which every rank of the node starts together, runs `iters` repetitions of
// its own transfer, and the round counts as its slowest rank's time; the ceiling is bytes over
// the median round, the lowest over emulated nodes. The heap is reset afterwards.
#include <mpi.h>

#include <algorithm>
#include <vector>

#include "comm/group_state.h"
#include "sol/comm.h"
#include "sol/timing.h"

namespace sol::comm {

// transfer(): one repetition on this rank; returns false when this rank takes no part (its
// time then counts as zero — it waits in Sol's pausing barrier, not in MPI's busy poll, so it
// takes no issue slots from an SMT sibling that copies).
template <class Transfer>
double median_round_rate(const Group& group, double bytes, int iters, int batches, Transfer&& transfer) {
  const Group& local = group.local();
  detail::GroupState& s = local.state();
  std::vector<double> per_batch;
  for (int b = 0; b < std::max(batches, 1); ++b) {
    local.barrier();
    const double start = now_seconds();
    bool active = true;
    for (int i = 0; i < iters && active; ++i) active = transfer();
    double mine = active ? (now_seconds() - start) / iters : 0, slowest = 0;
    local.barrier();
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, s.comm);
    per_batch.push_back(slowest);
  }
  local.barrier();
  local.heap_reset();
  std::sort(per_batch.begin(), per_batch.end());
  const double t = per_batch[per_batch.size() / 2];
  double rate = t > 0 ? bytes / t : 0, lowest = 0;
  MPI_Allreduce(&rate, &lowest, 1, MPI_DOUBLE, MPI_MIN, group.state().comm);
  return lowest;
}

}  // namespace sol::comm
