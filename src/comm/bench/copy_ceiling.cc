// The inter-process copy ceiling: every rank of the node copies a message from the next local
// rank's shared segment into its own, all at once. This is the transfer every collective is
// made of (a rank reading a peer's buffer into its own), without any synchronisation, so no
// collective moving the same bytes per rank can beat it.
#include <mpi.h>

#include <algorithm>
#include <vector>

#include "comm/group_state.h"
#include "comm/move_bytes.h"
#include "sol/comm_bench.h"
#include "sol/timing.h"

namespace sol::comm {

double interprocess_copy_ceiling(const Group& group, size_t bytes, int iters, int batches, bool root_idle) {
  const Group& local = group.local();
  detail::GroupState& s = local.state();
  auto* src = static_cast<std::byte*>(local.heap_alloc(bytes));
  auto* dst = static_cast<std::byte*>(local.heap_alloc(bytes));
  std::fill_n(src, bytes, std::byte{0x5A});
  std::fill_n(dst, bytes, std::byte{0});
  const int peer = (s.rank + 1) % s.size;
  const std::byte* peer_src = s.shm->base(peer) + (src - s.shm->base(s.rank));
  const bool copies = !(root_idle && s.rank == 0 && s.size > 1);
  std::vector<double> per_batch;
  for (int b = 0; b < std::max(batches, 1); ++b) {
    local.barrier();
    const double start = now_seconds();
    if (copies)
      for (int i = 0; i < iters; ++i) detail::move_bytes(dst, peer_src, bytes);
    double mine = copies ? (now_seconds() - start) / iters : 0, slowest = 0;
    // An idle rank waits here, in Sol's pausing spin, not in MPI's polling: on SMT siblings a
    // busy poll takes issue slots from the copying rank, which the ops never suffer.
    local.barrier();
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, s.comm);
    per_batch.push_back(slowest);
  }
  local.barrier();
  local.heap_reset();
  std::sort(per_batch.begin(), per_batch.end());
  const double t = per_batch[per_batch.size() / 2];
  // Across emulated nodes every local group measured its own; the job's ceiling is the lowest.
  double rate = t > 0 ? double(bytes) / t : 0, lowest = 0;
  MPI_Allreduce(&rate, &lowest, 1, MPI_DOUBLE, MPI_MIN, group.state().comm);
  return lowest;
}

}  // namespace sol::comm
