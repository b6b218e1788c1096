#pragma once
// The timing both copy-style ceilings of the comm bench share (copy_ceiling.cc, ep_ceiling.cc):
// `batches` rounds in which every rank of the node starts together, runs the same number of
// repetitions of its own transfer, and the round counts as its slowest rank's time; the
// ceiling is bytes over the median round, the lowest over emulated nodes. The heap is reset
// afterwards.
//
// A round repeats the transfer `iters` times but lasts at most about kCeilingRoundSeconds: the
// count is cut to fit from one timed repetition, so a large --iters cannot turn the ceiling
// into minutes of copying during which nobody notices a stopped peer. Every wait between the
// copies is one of comm's, bounded by SOL_COMM_TIMEOUT_S (agree.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "comm/bench/agree.h"
#include "comm/group_state.h"
#include "sol/comm.h"
#include "sol/timing.h"

namespace sol::comm {

inline constexpr double kCeilingRoundSeconds = 0.25;

// Repetitions of a transfer whose slowest single run took `slowest_s`, capped by `iters`.
inline int repetitions_within(double slowest_s, int iters, double budget_s = kCeilingRoundSeconds) {
  const int wanted = std::max(iters, 1);
  if (!(slowest_s > 0)) return wanted;
  return int(std::clamp(std::floor(budget_s / slowest_s), 1.0, double(wanted)));
}

// transfer(): one repetition on this rank; returns false when this rank takes no part (its
// time then counts as zero — it waits in Sol's pausing barrier, not in MPI's busy poll, so it
// takes no issue slots from an SMT sibling that copies).
template <class Transfer>
double median_round_rate(const Group& group, double bytes, int iters, int batches, Transfer&& transfer) {
  const Group& local = group.local();
  local.barrier();
  double start = now_seconds();
  const bool active = transfer();
  const double first = active ? now_seconds() - start : 0;
  const int reps = repetitions_within(detail::max_over(local, first), iters);
  std::vector<double> per_batch;
  for (int b = 0; b < std::max(batches, 1); ++b) {
    local.barrier();
    start = now_seconds();
    for (int i = 0; i < reps && active; ++i) transfer();
    const double mine = active ? (now_seconds() - start) / reps : 0;
    per_batch.push_back(detail::max_over(local, mine));
  }
  local.barrier();
  local.heap_reset();
  std::sort(per_batch.begin(), per_batch.end());
  const double t = per_batch[per_batch.size() / 2];
  return detail::min_over(group, t > 0 ? bytes / t : 0);
}

}  // namespace sol::comm
