// Sharded Engram lookup within one node: every shard lies in a comm::Window, so a rank copies
// each row it asked for straight out of its owner's shard into its output — one copy per row,
// the least any lookup can move (every output byte is written once from a row read once).
// Nothing is exchanged but one flag per rank (read by every rank after a window fence), which
// makes every rank agree on bad indices; that fence also publishes every owner's earlier writes
// of its shard. The lookup ends with a second fence, after which no peer reads a shard, so its
// owner may rewrite it. Repeated indices are copied once per occurrence.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "engram/table_impl.h"
#include "kernels/gather.h"
#include "hw/kernel_select.h"
#include "kernels/engram.h"
#include "kernels/move_bytes.h"
#include "core/parallel.h"
#include "hw/streaming.h"
#include "sol/error.h"
#include "sol/hw.h"

namespace sol::engram {

namespace {

// How much one LookupHandle::test() copies: a few microseconds, so a layer that polls between
// pieces of its own work is not held up, and a few polls finish a typical lookup.
constexpr int64_t kTestChunkBytes = int64_t(256) << 10;
// Rows per thread at least: below this, starting threads costs more than the copy.
constexpr int64_t kGrainBytes = int64_t(16) << 10;

struct OneSidedInFlight final : LookupHandle::State {
  const ShardedTable::Impl& table;
  Tensor out;
  int64_t next = 0, total = 0;
  bool fence_started = false;

  OneSidedInFlight(const ShardedTable::Impl& t, const Tensor& o) : table(t), out(o), total(o.shape(0) * o.shape(1)) {}

  void finish_copies() {
    if (next < total) table.one_sided_copy_rows(out, next, total);
    next = total;
    if (!fence_started) table.window->fence_start();
    fence_started = true;
  }
  bool test() override {
    if (done) return true;
    if (next < total) {
      const int64_t to = std::min(total, next + std::max<int64_t>(1, kTestChunkBytes / int64_t(table.row_bytes)));
      table.one_sided_copy_rows(out, next, to);
      next = to;
    }
    if (next == total && !fence_started) {
      table.window->fence_start();
      fence_started = true;
    }
    if (fence_started && table.window->fence_test()) {
      done = true;
      table.in_flight = false;
    }
    return done;
  }
  void wait() override {
    if (done) return;
    finish_copies();
    table.window->fence_wait();
    done = true;
    table.in_flight = false;
  }
};

}  // namespace

void ShardedTable::Impl::one_sided_start(const Tensor& indices) const {
  const int P = group.size();
  const int32_t* idx = indices.data_as<int32_t>();
  const int64_t n = indices.numel();
  // Any index outside the table? (No early exit: the loop vectorizes; the position is looked
  // for only when there is one.)
  uint32_t any_bad = 0;
  for (int64_t i = 0; i < n; ++i) any_bad |= uint32_t(uint32_t(idx[i]) >= uint64_t(rows));
  int64_t bad = -1;
  if (any_bad) bad = first_bad_index(indices);
  else {
    sources.resize(size_t(n));
    select_kernels(kernels::engram_kernel_table(), "engram lookup").row_sources(map, idx, n, sources.data());
  }
  // Every rank's verdict, published by the fence (it also orders the owners' writes of their
  // shards before this lookup's reads). The previous lookup's closing fence guarantees every
  // peer read the previous verdict before this one is written.
  const int32_t mine = bad >= 0 ? 1 : 0;
  std::memcpy(window->local() + flag_offset, &mine, sizeof mine);
  window->fence();
  int bad_rank = -1;
  for (int r = 0; r < P && bad_rank < 0; ++r) {
    int32_t flag = 0;
    std::memcpy(&flag, window->peer(r) + flag_offset, sizeof flag);
    if (flag != 0) bad_rank = r;
  }
  if (bad_rank < 0) return;
  // Every rank fails; one more fence first, so no rank writes its next verdict while a peer
  // still reads this one.
  window->fence();
  if (bad >= 0) fail_bad_index(indices, bad);
  fail("engram lookup", "rank ", bad_rank, " passed an index outside the table's rows 0..", rows - 1);
}

void ShardedTable::Impl::one_sided_copy_rows(const Tensor& out, int64_t from, int64_t to) const {
  const int64_t rb = int64_t(row_bytes);
  // Streaming stores only when the whole output cannot stay in the LLC (a layer reads it next).
  const bool stream = should_stream(out.shape(0) * out.shape(1) * rb);
  const kernels::MoveKernels& mk = select_kernels(kernels::move_kernel_table(), "engram lookup");
  char* y = out.data_as<char>();
  const char* const* src = sources.data();
  parallel_ranges(to - from, std::max<int64_t>(1, kGrainBytes / rb), [&](int64_t a, int64_t b) {
    a += from, b += from;
    if (mk.gather_rows) {
      mk.gather_rows(y + a * rb, rb, src + a, b - a, rb, stream);
      return;
    }
    for (int64_t r = a; r < b; ++r) mk.copy(y + r * rb, src[r], rb, stream, /*fence=*/true);
  });
}

void ShardedTable::Impl::one_sided_lookup(const Tensor& indices, const Tensor& out) const {
  one_sided_start(indices);
  one_sided_copy_rows(out, 0, indices.numel());
  window->fence();
}

std::unique_ptr<LookupHandle::State> ShardedTable::Impl::one_sided_async(const Tensor& indices,
                                                                         const Tensor& out) const {
  one_sided_start(indices);
  in_flight = true;
  return std::make_unique<OneSidedInFlight>(*this, out);
}

}  // namespace sol::engram
