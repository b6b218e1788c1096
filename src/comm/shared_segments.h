#pragma once
// The symmetric heap's memory: one POSIX shm segment per rank of a node-local group, each
// mapped by every rank of the group. Names are exchanged over MPI; each owner unlinks its
// segment as soon as every peer has mapped it, so nothing is left in /dev/shm even if a rank
// is killed afterwards.
#include <mpi.h>

#include <cstddef>
#include <vector>

#include "comm/segment_layout.h"

namespace sol::comm::detail {

class SharedSegments {
 public:
  // Collective over `local_comm` (all ranks on one node).
  SharedSegments(MPI_Comm local_comm, const SegmentLayout& layout);
  ~SharedSegments();
  SharedSegments(const SharedSegments&) = delete;
  SharedSegments& operator=(const SharedSegments&) = delete;

  const SegmentLayout& layout() const { return layout_; }
  std::byte* base(int rank) const { return bases_[size_t(rank)]; }
  ControlBlock& control(int rank) const { return *reinterpret_cast<ControlBlock*>(base(rank)); }
  int pid(int rank) const { return pids_[size_t(rank)]; }
  // The mailbox in `owner`'s segment that `sender` writes to, and its ring.
  MailboxHeader& mailbox(int owner, int sender) const {
    return *reinterpret_cast<MailboxHeader*>(base(owner) + layout_.mailbox_offset(sender));
  }
  std::byte* ring(int owner, int sender) const {
    return base(owner) + layout_.mailbox_offset(sender) + kPage;
  }
  std::byte* staging(int rank, int slot) const { return base(rank) + layout_.staging_offset(slot); }
  // Offset of p within this rank's own segment, or -1 when p (with `bytes` after it) is not
  // inside it.
  int64_t own_offset(const void* p, size_t bytes) const;

 private:
  SegmentLayout layout_;
  int rank_ = 0;
  std::vector<std::byte*> bases_;
  std::vector<int> pids_;
};

}  // namespace sol::comm::detail
