// The shared-memory algorithms. Staged data of a step lives in the staging slot of that
// step's parity; a slot is rewritten two steps later, after every peer has posted the step in
// between and so has finished reading it (the same rule as the step records).
#include "comm/local_collectives.h"

#include <algorithm>
#include <vector>

#include "comm/move_bytes.h"
#include "comm/reduce.h"
#include "comm/wait.h"
#include "hw/streaming.h"

namespace sol::comm::detail {

namespace {

// Up to this size an allreduce copies its whole input into staging and every rank reduces all
// of it: one step, the latency floor. Above it, each rank reduces only its part.
constexpr size_t kOneShotBytes = size_t(64) << 10;
// From this size heap buffers take the push path even below the one-shot limit: it won from
// 32 KiB and was even at 16 KiB (docs/perf/comm.md).
constexpr size_t kPushMinBytes = size_t(16) << 10;

bool in_heap(const GroupState& s, const void* p, size_t bytes) {
  return s.heap_offset_of(p, bytes) >= 0;
}

uint64_t offset_in_segment(const GroupState& s, const void* p) {
  return uint64_t(s.shm->own_offset(p, 0));
}

const std::byte* bytes_of(const void* p) { return static_cast<const std::byte*>(p); }
std::byte* bytes_of(void* p) { return static_cast<std::byte*>(p); }

// The staging slot of the step after the current one: free to write now, because every peer
// has posted the current step and so finished reading the previous one.
std::byte* next_staging(const GroupState& s) { return s.shm->staging(s.rank, int((s.step + 1) % 2)); }

void close_zero_copy(GroupState& s, StepOp op, std::string_view name) {
  StepRecord& r = s.begin_step(op, 0);
  r.zero_copy = 1;
  s.post_and_wait(name);
}

}  // namespace

void local_barrier(GroupState& s, std::string_view op) {
  s.begin_step(StepOp::barrier, 0);
  s.post_and_wait(op);
}

void local_allreduce(GroupState& s, const void* in, void* out, int64_t count, DType t, ReduceOp op,
                     const PartHook& across) {
  const size_t es = dtype_size(t), bytes = size_t(count) * es;
  const int L = s.size;
  std::vector<const void*> sources(static_cast<size_t>(L));
  auto begin = [&](bool zero_copy) -> StepRecord& {
    StepRecord& r = s.begin_step(StepOp::allreduce, bytes, uint32_t(t), uint32_t(op));
    r.zero_copy = zero_copy;
    return r;
  };
  const bool zero_copy = in_heap(s, in, bytes) && in_heap(s, out, bytes);
  if (bytes <= kOneShotBytes && bytes <= s.staging_bytes() && !(zero_copy && !across && bytes >= kPushMinBytes)) {
    StepRecord& r = begin(false);
    move_bytes(s.own_staging(), in, bytes);
    r.data_offset = offset_in_segment(s, s.own_staging());
    s.post_and_wait("allreduce");
    for (int p = 0; p < L; ++p) sources[size_t(p)] = s.data(p);
    reduce_sources(out, sources.data(), L, count, t, op);
    if (across) across(out, count);
    return;
  }
  if (zero_copy && !across) {
    // Push: each rank reduces its part of every rank's input and streams the result straight
    // into every rank's output — one read and one write per byte (2 n of traffic, what the
    // copy ceiling moves), where reducing locally and then copying peers' parts costs 2.5 n
    // (docs/perf/comm.md). Only rank r touches part r of any buffer, so in and out
    // may alias; the second step tells everyone that their output is complete, and since no
    // rank reads or writes peers' buffers after it, no closing step is needed.
    StepRecord& a = begin(true);
    a.data_offset = offset_in_segment(s, in);
    s.own_counts()[0] = offset_in_segment(s, out);
    s.post_and_wait("allreduce");
    const int64_t pb = part_begin(count, s.rank, L), pe = part_begin(count, s.rank + 1, L);
    std::vector<void*> outputs(static_cast<size_t>(L));
    for (int p = 0; p < L; ++p) {
      sources[size_t(p)] = s.data(p) + pb * es;
      outputs[size_t(p)] = s.shm->base(p) + s.counts(p)[0] + pb * es;
    }
    reduce_sources_to(outputs.data(), L, sources.data(), L, pe - pb, t, op, true);
    begin(true);
    s.post_and_wait("allreduce");
    return;
  }
  // The copy-out of peers' parts streams once the message outgrows half the LLC, even where
  // each part alone would not (16 MiB, 2 ranks: 8 MiB parts; docs/perf/comm.md).
  const bool stream_out = zero_copy && should_stream(int64_t(bytes));
  // Zero copy: one round over everything. Staged: rounds of one staging slot.
  const int64_t chunk = zero_copy ? count : int64_t(s.staging_bytes() / es);
  for (int64_t off = 0; off < count; off += chunk) {
    const int64_t n = std::min(chunk, count - off);
    const std::byte* src = bytes_of(in) + off * es;
    const int64_t pb = part_begin(n, s.rank, L), pe = part_begin(n, s.rank + 1, L);
    StepRecord& a = begin(zero_copy);
    if (zero_copy) {
      a.data_offset = offset_in_segment(s, src);
    } else {
      // Staged: only the parts peers reduce; this rank reads its own part from `in`.
      for (int p = 0; p < L; ++p) {
        if (p == s.rank) continue;
        const int64_t b0 = part_begin(n, p, L), b1 = part_begin(n, p + 1, L);
        move_bytes(s.own_staging() + b0 * es, src + b0 * es, size_t(b1 - b0) * es);
      }
      a.data_offset = offset_in_segment(s, s.own_staging());
    }
    s.post_and_wait("allreduce");
    // Reduce my part of this round; peers read it in the next step.
    for (int p = 0; p < L; ++p)
      sources[size_t(p)] = p == s.rank && !zero_copy ? src + pb * es : s.data(p) + pb * es;
    std::byte* result = zero_copy ? bytes_of(out) + off * es : next_staging(s);
    // In place, each part is written here and read by every peer next: non-temporal stores
    // send it to memory instead of leaving modified lines that peers must fetch from this
    // core's cache. Measured (docs/perf/comm.md), 2 ranks: 1-4 MiB 12 -> 29-32 GB/s busbw.
    // Staged rounds (4 MiB slots, read back at once) measured slower with them: not used.
    reduce_sources(result + pb * es, sources.data(), L, pe - pb, t, op, zero_copy);
    if (across) across(result + pb * es, pe - pb);
    StepRecord& b = begin(zero_copy);
    b.data_offset = offset_in_segment(s, result);
    s.post_and_wait("allreduce");
    for (int p = 0; p < L; ++p) {
      if (zero_copy && p == s.rank) continue;
      const int64_t b0 = part_begin(n, p, L), b1 = part_begin(n, p + 1, L);
      move_bytes(bytes_of(out) + (off + b0) * es, s.data(p) + b0 * es, size_t(b1 - b0) * es, stream_out);
    }
  }
  if (zero_copy) close_zero_copy(s, StepOp::allreduce, "allreduce");
}

void local_reduce_scatter(GroupState& s, const void* in, void* out, int64_t count, DType t,
                          ReduceOp op) {
  const size_t es = dtype_size(t), block = size_t(count) * es;
  const int L = s.size;
  std::vector<const void*> sources(static_cast<size_t>(L));
  const bool zero_copy = in_heap(s, in, block * size_t(L));
  const int64_t chunk =
      zero_copy ? count : std::max<int64_t>(1, int64_t(s.staging_bytes() / (es * size_t(L))));
  for (int64_t off = 0; off < count || off == 0; off += chunk) {
    const int64_t n = std::min(chunk, count - off);
    StepRecord& r = s.begin_step(StepOp::reduce_scatter, block, uint32_t(t), uint32_t(op));
    r.zero_copy = zero_copy;
    // Staged rounds pack piece p of this round at p*n in the slot; in place it is at p*count.
    int64_t stride = zero_copy ? count : n;
    if (zero_copy) {
      r.data_offset = offset_in_segment(s, in);
    } else {
      for (int p = 0; p < L; ++p)
        move_bytes(s.own_staging() + size_t(p * n) * es, bytes_of(in) + (p * count + off) * es,
                   size_t(n) * es);
      r.data_offset = offset_in_segment(s, s.own_staging());
    }
    s.post_and_wait("reduce_scatter");
    const int64_t mine = zero_copy ? off : 0;
    for (int p = 0; p < L; ++p) sources[size_t(p)] = s.data(p) + (s.rank * stride + mine) * es;
    reduce_sources(bytes_of(out) + off * es, sources.data(), L, n, t, op, should_stream(int64_t(block) * L));
    if (count == 0) break;
  }
  if (zero_copy) close_zero_copy(s, StepOp::reduce_scatter, "reduce_scatter");
}

void local_all_gather(GroupState& s, const void* in, void* out, size_t bytes) {
  const int L = s.size;
  const bool zero_copy = in_heap(s, in, bytes);
  // In place (in is this rank's block of out, as in nccl-tests): no copy of our own block.
  const bool in_place = in == bytes_of(out) + size_t(s.rank) * bytes;
  const bool stream_out = should_stream(int64_t(bytes) * L);
  if (zero_copy && in_heap(s, out, bytes * size_t(L))) {
    // Push: each rank writes its block into every rank's output, reading it once per piece
    // that stays in L2 — N/L read and N written per rank instead of N read and N written
    // (docs/perf/comm.md). The first step publishes where each output is (and that
    // its owner is inside the call); the second, that every block has landed.
    StepRecord& a = s.begin_step(StepOp::all_gather, bytes);
    a.zero_copy = 2;
    a.data_offset = offset_in_segment(s, in);
    s.own_counts()[0] = offset_in_segment(s, out);
    s.post_and_wait("all_gather");
    std::vector<std::byte*> outputs(static_cast<size_t>(L));
    for (int p = 0; p < L; ++p) outputs[size_t(p)] = s.shm->base(p) + s.counts(p)[0] + size_t(s.rank) * bytes;
    constexpr size_t kPiece = size_t(256) << 10;
    for (size_t off = 0; off < bytes; off += kPiece)
      for (int k = 1; k <= L; ++k) {
        const int p = (s.rank + k) % L;  // peers first, each rank starting at another one
        if (in_place && p == s.rank) continue;
        move_bytes(outputs[size_t(p)] + off, bytes_of(in) + off, std::min(kPiece, bytes - off), stream_out);
      }
    StepRecord& b = s.begin_step(StepOp::all_gather, bytes);
    b.zero_copy = 2;
    s.post_and_wait("all_gather");
    return;
  }
  const size_t chunk = zero_copy ? bytes : s.staging_bytes();
  for (size_t off = 0; off < bytes || off == 0; off += chunk) {
    const size_t n = std::min(chunk, bytes - off);
    StepRecord& r = s.begin_step(StepOp::all_gather, bytes);
    r.zero_copy = zero_copy;
    if (zero_copy) {
      r.data_offset = offset_in_segment(s, in);
    } else {
      move_bytes(s.own_staging(), bytes_of(in) + off, n);
      r.data_offset = offset_in_segment(s, s.own_staging());
    }
    s.post_and_wait("all_gather");
    const size_t from = zero_copy ? off : 0;
    for (int p = 0; p < L; ++p)
      if (!(in_place && p == s.rank))
        move_bytes(bytes_of(out) + size_t(p) * bytes + off, s.data(p) + from, n, stream_out);
    if (bytes == 0) break;
  }
  if (zero_copy) close_zero_copy(s, StepOp::all_gather, "all_gather");
}

void local_all_to_all_v(GroupState& s, StepOp op, const void* in, const uint64_t* send_bytes,
                        void* out, const uint64_t* recv_bytes) {
  const int L = s.size;
  const std::string_view name = step_op_name(op);
  uint64_t total_send = 0;
  for (int p = 0; p < L; ++p) total_send += send_bytes[p];
  const bool zero_copy = in_heap(s, in, total_send);
  // First step: every rank publishes its send sizes (and, in place, its input); each rank
  // checks that what peers send it is what it expects.
  StepRecord& r = s.begin_step(op, op == StepOp::all_to_all ? send_bytes[0] : 0);
  r.zero_copy = zero_copy;
  std::copy(send_bytes, send_bytes + L, s.own_counts());
  if (zero_copy) r.data_offset = offset_in_segment(s, in);
  s.post_and_wait(name);
  std::vector<uint64_t> recv_offset(size_t(L) + 1, 0), source_offset(size_t(L), 0);
  uint64_t largest = 0;
  for (int p = 0; p < L; ++p) {
    const uint64_t* theirs = s.counts(p);
    if (theirs[s.rank] != recv_bytes[p])
      comm_failure(std::string(name) + ": rank " + std::to_string(s.world_rank_of[size_t(p)]) + " sends " +
                   std::to_string(theirs[s.rank]) + " bytes to rank " +
                   std::to_string(s.world_rank_of[size_t(s.rank)]) + " which expects " +
                   std::to_string(recv_bytes[p]));
    for (int q = 0; q < s.rank; ++q) source_offset[size_t(p)] += theirs[q];
    for (int q = 0; q < L; ++q) largest = std::max(largest, theirs[q]);
    recv_offset[size_t(p) + 1] = recv_offset[size_t(p)] + recv_bytes[p];
  }
  if (zero_copy) {
    const bool stream_out = should_stream(int64_t(recv_offset[size_t(L)]));
    for (int p = 0; p < L; ++p)
      move_bytes(bytes_of(out) + recv_offset[size_t(p)], s.data(p) + source_offset[size_t(p)],
                 recv_bytes[p], stream_out);
    close_zero_copy(s, op, name);
    return;
  }
  // Staged: each round carries the next `piece` bytes of every block; every rank saw the
  // same largest block, so all run the same number of rounds.
  const uint64_t piece = s.staging_bytes() / uint64_t(L);
  std::vector<uint64_t> send_offset(size_t(L) + 1, 0);
  for (int p = 0; p < L; ++p) send_offset[size_t(p) + 1] = send_offset[size_t(p)] + send_bytes[p];
  for (uint64_t off = 0; off < largest; off += piece) {
    StepRecord& round = s.begin_step(op, op == StepOp::all_to_all ? send_bytes[0] : 0);
    for (int p = 0; p < L; ++p)
      if (send_bytes[p] > off)
        move_bytes(s.own_staging() + size_t(p) * piece, bytes_of(in) + send_offset[size_t(p)] + off,
                   std::min(piece, send_bytes[p] - off));
    round.data_offset = offset_in_segment(s, s.own_staging());
    s.post_and_wait(name);
    for (int p = 0; p < L; ++p)
      if (recv_bytes[p] > off)
        move_bytes(bytes_of(out) + recv_offset[size_t(p)] + off, s.data(p) + size_t(s.rank) * piece,
                   std::min(piece, recv_bytes[p] - off));
  }
}

void local_broadcast(GroupState& s, void* buffer, size_t bytes, int root) {
  const bool zero_copy = in_heap(s, buffer, bytes);
  const size_t chunk = zero_copy ? bytes : s.staging_bytes();
  for (size_t off = 0; off < bytes || off == 0; off += chunk) {
    const size_t n = std::min(chunk, bytes - off);
    StepRecord& r = s.begin_step(StepOp::broadcast, bytes, 0, 0, root);
    r.zero_copy = zero_copy;
    if (s.rank == root) {
      if (!zero_copy) move_bytes(s.own_staging(), bytes_of(buffer) + off, n);
      r.data_offset = offset_in_segment(s, zero_copy ? buffer : s.own_staging());
    }
    s.post_and_wait("broadcast");
    if (s.rank != root) move_bytes(bytes_of(buffer) + off, s.data(root) + (zero_copy ? off : 0), n);
    if (bytes == 0) break;
  }
  if (zero_copy) close_zero_copy(s, StepOp::broadcast, "broadcast");
}

}  // namespace sol::comm::detail
