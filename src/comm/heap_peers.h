#pragma once
// One-sided access to peers' symmetric-heap memory, for protocols built above the collectives
// (expert-parallel dispatch and combine): the address of a heap allocation in a peer's
// segment (heap_alloc hands every rank the same offset), and bounded waits on flags that
// peers raise there. Node-local groups only.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "comm/group_state.h"
#include "comm/wait.h"
#include "sol/comm.h"

namespace sol::comm::detail {

// `own` lies in this rank's heap (from heap_alloc of this node-local group); returns the same
// location in `peer`'s segment.
inline std::byte* heap_peer_address(const Group& g, const void* own, int peer) {
  const GroupState& s = g.state();
  const std::byte* base = s.shm->base(s.rank);
  return s.shm->base(peer) + (static_cast<const std::byte*>(own) - base);
}

// Waits (bounded, watching the peer's process) until `flag`, raised by `peer` with release
// stores, reaches `value`; throws CommError naming op, peer and `what` otherwise.
inline void wait_flag_at_least(const Group& g, const std::atomic<uint64_t>& flag, uint64_t value,
                               int peer, std::string_view op, std::string_view what) {
  if (flag.load(std::memory_order_acquire) >= value) return;
  const GroupState& s = g.state();
  wait_until([&] { return flag.load(std::memory_order_acquire) >= value; },
             [&] {
               return WaitFor{op, s.world_rank_of[size_t(peer)], s.shm->pid(peer),
                              std::string(what) + " " + std::to_string(value) + " (flag is at " +
                                  std::to_string(flag.load()) + ")"};
             });
}

}  // namespace sol::comm::detail
