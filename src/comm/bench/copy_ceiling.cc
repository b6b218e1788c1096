// The inter-process copy ceiling: every rank of the node copies a message from the next local
// rank's shared segment into its own, all at once. This is the transfer every collective is
// made of (a rank reading a peer's buffer into its own), without any synchronisation, so no
// collective moving the same bytes per rank can beat it.

#include <algorithm>
#include <vector>

#include "comm/bench/ceiling_batches.h"
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
  // Across emulated nodes every local group measures its own; the job's ceiling is the lowest.
  return median_round_rate(group, double(bytes), iters, batches, [&] {
    if (!copies) return false;
    detail::move_bytes(dst, peer_src, bytes);
    return true;
  });
}

}  // namespace sol::comm
