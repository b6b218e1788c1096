// comm::Window: a node-local group's shared regions (include/sol/comm_window.h).
//
// The regions are SharedSegments of their own with no mailboxes' rings and no staging: only
// the control block (whose step counter carries the fence and whose pid lets waits notice a
// dead peer), one page per (unused) mailbox header, then the region. Every rank maps the
// largest size asked for; tmpfs commits pages only when touched, so the slack costs nothing.
#include "sol/comm_window.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "comm/group_state.h"
#include "comm/mpi_deadline.h"
#include "comm/move_bytes.h"
#include "comm/shared_segments.h"
#include "comm/wait.h"
#include "sol/error.h"

namespace sol::comm {

struct Window::Impl {
  Group group;
  std::unique_ptr<detail::SharedSegments> shm;
  std::vector<size_t> sizes;
  uint64_t epoch = 0;  // fences this rank has started

  Impl(const Group& g, size_t bytes) : group(g) {
    check(g.num_nodes() == 1, "comm window", "the group spans ", g.num_nodes(),
          " nodes but a window needs ranks that share memory (build it over group.local())");
    const detail::GroupState& s = g.state();
    sizes.resize(size_t(s.size));
    const uint64_t mine = bytes;
    int rc = MPI_SUCCESS;
    detail::with_mpi_deadline("comm window set-up (region sizes and shared segments)", timeout_seconds(),
                              "SOL_COMM_TIMEOUT_S", [&] {
                                rc = MPI_Allgather(&mine, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, s.comm);
                                if (rc != MPI_SUCCESS) return;
                                detail::SegmentLayout layout;
                                layout.ring_bytes = 0;
                                layout.staging_slot_bytes = 0;
                                layout.heap_bytes =
                                    detail::round_up(*std::max_element(sizes.begin(), sizes.end()), detail::kPage);
                                shm = std::make_unique<detail::SharedSegments>(s.comm, layout);
                              });
    if (rc != MPI_SUCCESS) detail::comm_failure("comm window: exchanging the region sizes failed (a peer is gone)");
  }

  std::byte* region(int rank) const { return shm->base(rank) + shm->layout().heap_offset(); }
  std::atomic<uint64_t>& fence_counter(int rank) const { return shm->control(rank).step; }

  void check_range(const char* what, int rank, size_t offset, size_t bytes) const {
    check(rank >= 0 && rank < group.size(), "comm window", what, ": rank ", rank, " outside 0..",
          group.size() - 1);
    const size_t size = sizes[size_t(rank)];
    check(offset <= size && bytes <= size - offset, "comm window", what, ": bytes [", offset, ", ",
          offset + bytes, ") of rank ", rank, "'s region, which holds ", size, " bytes");
  }
};

Window::Window(const Group& group, size_t bytes) : impl_(std::make_unique<Impl>(group, bytes)) {}
Window::~Window() = default;
Window::Window(Window&&) noexcept = default;
Window& Window::operator=(Window&&) noexcept = default;

const Group& Window::group() const { return impl_->group; }

size_t Window::bytes(int rank) const {
  check(rank >= 0 && rank < impl_->group.size(), "comm window", "bytes: rank ", rank, " outside 0..",
        impl_->group.size() - 1);
  return impl_->sizes[size_t(rank)];
}

std::byte* Window::local() const { return impl_->region(impl_->group.rank()); }

std::byte* Window::peer(int rank) const {
  check(rank >= 0 && rank < impl_->group.size(), "comm window", "peer: rank ", rank, " outside 0..",
        impl_->group.size() - 1);
  return impl_->region(rank);
}

void Window::get(void* dst, int rank, size_t offset, size_t bytes) const {
  impl_->check_range("get", rank, offset, bytes);
  detail::move_bytes(dst, impl_->region(rank) + offset, bytes);
}

void Window::put(int rank, size_t offset, const void* src, size_t bytes) const {
  impl_->check_range("put", rank, offset, bytes);
  detail::move_bytes(impl_->region(rank) + offset, src, bytes);
}

void Window::fence_start() const {
  Impl& w = *impl_;
  // Release: this rank's reads and writes of any region happen before a peer that sees the
  // new count goes on (the copy kernels fence their streaming stores themselves).
  w.fence_counter(w.group.rank()).store(++w.epoch, std::memory_order_release);
}

bool Window::fence_test() const {
  const Impl& w = *impl_;
  for (int r = 0; r < w.group.size(); ++r)
    if (w.fence_counter(r).load(std::memory_order_acquire) < w.epoch) return false;
  return true;
}

void Window::fence_wait() const {
  const Impl& w = *impl_;
  const detail::GroupState& s = w.group.state();
  for (int r = 0; r < w.group.size(); ++r) {
    const std::atomic<uint64_t>& counter = w.fence_counter(r);
    detail::wait_until([&] { return counter.load(std::memory_order_acquire) >= w.epoch; },
                       [&] {
                         return detail::WaitFor{"window fence", s.world_rank_of[size_t(r)], w.shm->pid(r),
                                                "it to start fence " + std::to_string(w.epoch) + " (it has started " +
                                                    std::to_string(counter.load()) + ")"};
                       });
  }
}

void Window::fence() const {
  fence_start();
  fence_wait();
}

}  // namespace sol::comm
