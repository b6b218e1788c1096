// Normal-mode combine on one node (and, through all_to_all_v, across nodes of unequal size):
// out[t] = Σ over the ranks token t went to of y at its received row, in rank order, summed in
// f32 and rounded once.
//
// On one node, combine m:
//   1. Each rank raises combine_posted = 2m (+1 when y is its combine_buffer()) and reads every
//      peer's: all ranks must agree on the mode. A peer that has posted m has finished reducing
//      m−1, so its region may be written.
//   2. Copy mode (y anywhere): each expert rank puts the y rows of source p ≠ itself into p's
//      combine region (blocks by expert rank, p's token order), then a node round of
//      combine_sent = m. A source reads its OWN rows straight from its y: with R ranks that is
//      1/R of the rows never copied.
//      In-place mode (y = combine_buffer()): nothing moves; the source reads every peer's rows
//      where the peer's expert GEMM wrote them, then a node round of combine_done = m says every
//      peer is done reading, so the caller may write the next y there.
//   3. The source reduces each token over its rows in rank order.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "comm/move_bytes.h"
#include "comm/reduce.h"
#include "comm/wait.h"
#include "ep/buffer_state.h"
#include "core/parallel.h"
#include "hw/streaming.h"
#include "sol/error.h"

namespace sol::ep {

Tensor Buffer::combine_buffer(const DispatchHandle& handle) {
  const char* op = "ep::combine_buffer";
  State& s = *state_;
  check(handle.owner_ == this, op, "the handle does not come from a dispatch on this buffer");
  check(s.path == Path::one_node, op, "the in-place combine needs every rank on one node; the group spans ", s.N,
        " nodes (pass y in any memory instead)");
  return Tensor(s.own(s.off_combine), DType::bf16, {handle.recv_tokens_, s.H});
}

void Buffer::combine(const Tensor& y, const DispatchHandle& handle, const Tensor& out) {
  const char* op = "ep::combine";
  State& s = *state_;
  check(handle.owner_ == this, op, "the handle does not come from a dispatch on this buffer");
  check(s.max_tokens > 0, op, "the buffer was built without normal mode (max_tokens_per_rank = 0)");
  if (y.ndim() != 2 || y.dtype() != DType::bf16 || !y.is_contiguous() || y.shape(0) != handle.recv_tokens_ ||
      y.shape(1) != s.H)
    fail(op, "y must be a contiguous bf16 [", handle.recv_tokens_, ", ", s.H, "] tensor, got ", describe_text(y));
  if (out.ndim() != 2 || out.dtype() != DType::bf16 || !out.is_contiguous() || out.shape(0) != handle.tokens_ ||
      out.shape(1) != s.H)
    fail(op, "out must be a contiguous bf16 [", handle.tokens_, ", ", s.H, "] tensor, got ", describe_text(out));
  const int64_t H = s.H, T = handle.tokens_, row = H * 2;
  // y inside this rank's combine region: only combine_buffer() itself is allowed (peers write
  // into that region in copy mode).
  const std::byte* ys = static_cast<const std::byte*>(y.data());
  const std::byte* region = s.own(s.off_combine);
  const bool in_place = s.shared && ys == region;
  if (s.shared && !in_place) {
    const std::byte* end = region + size_t(s.cap) * size_t(row);
    check(ys + y.numel() * 2 <= region || ys >= end, op,
          "y overlaps the buffer's combine region but is not combine_buffer()'s view: pass that view whole");
  }
  if (s.path == Path::hierarchical) {
    combine_hierarchical(y, handle, out);
    return;
  }
  const int R = s.R, me = s.me;
  const std::vector<int64_t>& C = handle.counts_;
  const uint64_t m = ++s.combine_seq;
  // Rows of y from source p: [y_start[p], y_start[p] + C[p][me]).
  std::vector<int64_t> y_start(size_t(R) + 1, 0);
  for (int p = 0; p < R; ++p) y_start[size_t(p) + 1] = y_start[size_t(p)] + C[size_t(p * R + me)];
  // Where token t's row from rank d is, given its position pos within d's rows from this rank.
  std::vector<const std::byte*> from(static_cast<size_t>(R));
  if (s.shared) {
    s.flags().combine_posted.value.store(2 * m + (in_place ? 1 : 0), std::memory_order_release);
    for (int p = 0; p < R; ++p) {
      if (p == me) continue;
      s.wait_flag(p, s.flags_of(p).combine_posted, 2 * m, op, "combine call (entered)");
      const uint64_t theirs = s.flags_of(p).combine_posted.value.load(std::memory_order_acquire);
      if (theirs != 2 * m + (in_place ? 1 : 0))
        comm::detail::comm_failure(std::string(op) + ": ranks disagree on the in-place combine: rank " +
                                   std::to_string(p) + (theirs & 1 ? " passes" : " does not pass") +
                                   " combine_buffer() as y, this rank " + (in_place ? "does" : "does not"));
    }
    if (in_place) {
      // Rank d's y holds this rank's rows after those of lower sources.
      for (int d = 0; d < R; ++d) {
        int64_t at = 0;
        for (int q = 0; q < me; ++q) at += C[size_t(q * R + d)];
        from[size_t(d)] = s.peer(d, s.off_combine) + at * row;
      }
    } else {
      // This rank's region: blocks by expert rank d; this rank's block in p's region after
      // those of lower expert ranks.
      for (int k = 1; k < R; ++k) {
        const int p = (me + k) % R;  // start with a different peer on every rank
        int64_t at = 0;
        for (int d = 0; d < me; ++d) at += C[size_t(p * R + d)];
        comm::detail::move_bytes(s.peer(p, s.off_combine) + at * row, ys + y_start[size_t(p)] * row,
                                 size_t(C[size_t(p * R + me)] * row));
      }
      int64_t at = 0;
      for (int d = 0; d < R; ++d) {
        from[size_t(d)] = region + at * row;
        at += C[size_t(me * R + d)];
      }
      s.node_round(&Flags::combine_sent, m, op, "combine call (rows written back)");
    }
    from[size_t(me)] = ys + y_start[size_t(me)] * row;
    s.combine_traffic = {};
  } else {
    std::vector<int64_t> send(static_cast<size_t>(R)), recv(static_cast<size_t>(R));
    int64_t recv_total = 0;
    for (int p = 0; p < R; ++p) {
      send[size_t(p)] = C[size_t(p * R + me)] * H;
      recv[size_t(p)] = C[size_t(me * R + p)] * H;
      from[size_t(p)] = region + recv_total * 2;
      recv_total += recv[size_t(p)];
    }
    s.group.all_to_all_v(Tensor(const_cast<void*>(y.data()), DType::bf16, {y_start[size_t(R)] * H}), send,
                         Tensor(s.own(s.off_combine), DType::bf16, {recv_total}), recv);
    Traffic& traffic = s.combine_traffic;
    traffic = {};
    for (int p = 0; p < R; ++p)
      if (s.node_of[size_t(p)] != s.my_node) {
        traffic.cross_node_tokens_sent += C[size_t(p * R + me)];
        traffic.cross_node_tokens_received += C[size_t(me * R + p)];
      }
    traffic.cross_node_bytes_sent = traffic.cross_node_tokens_sent * row;
    traffic.cross_node_bytes_received = traffic.cross_node_tokens_received * row;
  }

  std::byte* o = static_cast<std::byte*>(out.data());
  const int32_t* send_pos = handle.send_pos_.data();
  const bool stream = should_stream(T * row);
  parallel_ranges(T, 1, [&](int64_t t0, int64_t t1) {
    std::vector<const void*> sources(static_cast<size_t>(R));
    for (int64_t t = t0; t < t1; ++t) {
      int count = 0;
      for (int d = 0; d < R; ++d) {
        const int64_t pos = send_pos[t * R + d];
        if (pos >= 0) sources[size_t(count++)] = from[size_t(d)] + pos * row;
      }
      if (count == 0) std::memset(o + t * row, 0, size_t(row));
      else comm::detail::reduce_sources(o + t * row, sources.data(), count, H, DType::bf16, comm::ReduceOp::sum, stream);
    }
  });
  if (in_place) s.node_round(&Flags::combine_done, m, op, "combine call (in-place rows read)");
}

}  // namespace sol::ep
