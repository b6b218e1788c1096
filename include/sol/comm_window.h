#pragma once
// sol::comm::Window — one-sided access to memory the ranks of one node share.
//
// Each rank of a node-local group contributes a region of its own (sizes may differ, 0 is
// allowed); every rank maps every peer's region, so it can read or write a peer's memory
// directly — MPI's shared-memory window (MPI_Win_allocate_shared + MPI_Win_shared_query), or
// NVSHMEM's symmetric heap with nvshmem_ptr. Nothing moves unless a rank moves it: get() and
// put() are plain bounded copies by the calling rank, and peer() hands out the address itself
// for access patterns a copy call would make slow (a gather of scattered rows).
//
// Ordering is the caller's, through fences: a fence is a barrier of the window's group with
// release/acquire ordering. When fence() returns on a rank, every access (get, put, or a direct
// read or write of any region) that any rank made before calling it is complete and visible
// to this rank; so an owner may overwrite its region after a fence without racing a peer's
// earlier get, and a reader sees every write made before the fence. The group's collectives
// order memory the same way, so a collective can stand in for a fence (Sol's sharded Engram
// lookup starts with one and ends with a fence).
//
// A window has its own shared segments (not the group's heap): it lives until destroyed,
// independent of heap_alloc / heap_reset, and destroying it is local (a peer still reading
// keeps its own mapping alive). Segments are unlinked once every rank has mapped them, so a
// crash leaks nothing.
#include <cstddef>
#include <memory>

#include "sol/comm.h"

namespace sol::comm {

class Window {
 public:
  // Collective over `group`: every rank calls it in the same order relative to the group's
  // other collectives. The group must lie within one node (num_nodes() == 1; sol::Error
  // otherwise: build the window over group.local()). The region starts zero-filled and
  // page-aligned.
  Window(const Group& group, size_t bytes);
  ~Window();
  Window(Window&&) noexcept;
  Window& operator=(Window&&) noexcept;

  const Group& group() const;
  size_t bytes(int rank) const;       // the size `rank` asked for
  std::byte* local() const;           // this rank's region
  std::byte* peer(int rank) const;    // `rank`'s region, mapped here (== local() for this rank)

  // Blocking copies by the calling rank, bounds-checked against `rank`'s region (sol::Error
  // naming the rank, offset and size). get: dst holds the bytes when it returns. put: the
  // bytes are in `rank`'s region when it returns, visible to `rank` after the next fence.
  void get(void* dst, int rank, size_t offset, size_t bytes) const;
  void put(int rank, size_t offset, const void* src, size_t bytes) const;

  // Completion fence (collective; see above). Waits are bounded (SOL_COMM_TIMEOUT_S) and
  // watch the peer's process: CommError naming the rank that did not arrive.
  void fence() const;
  // The same fence in two halves, so a rank can work while its peers catch up:
  // fence_start() declares this rank's earlier accesses complete; fence_test() is true once
  // every rank has started the latest fence this rank started; fence_wait() waits for that.
  // fence() == fence_start() + fence_wait().
  void fence_start() const;
  bool fence_test() const;
  void fence_wait() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sol::comm
