// Sharded Engram lookup within one node: every shard lies in a comm::Window, so a rank copies
// each row it asked for straight out of its owner's shard into its output — one copy per row,
// the least any lookup can move (every output byte is written once from a row read once).
// Nothing is exchanged but one flag per rank (an all_gather), which makes every rank agree on
// bad indices and also publishes every owner's earlier writes of its shard (the collective
// orders memory); the lookup ends with the window's fence, after which no peer reads a shard,
// so its owner may rewrite it. Repeated indices are copied once per occurrence.
#include <algorithm>

#include "engram/table_impl.h"
#include "kernels/gather.h"
#include "ops/common/copy_bytes.h"
#include "ops/common/parallel.h"
#include "ops/common/streaming.h"
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
  const int64_t bad = first_bad_index(indices);
  int32_t mine = bad >= 0 ? 1 : 0;
  std::vector<int32_t> flags(static_cast<size_t>(P));
  group.all_gather(Tensor(&mine, DType::i32, {1}), Tensor(flags.data(), DType::i32, {P}));
  if (bad >= 0) fail_bad_index(indices, bad);
  for (int r = 0; r < P; ++r)
    if (flags[size_t(r)] != 0) fail("engram lookup", "rank ", r, " passed an index outside the table's rows 0..", rows - 1);
  std::vector<const char*> shard_of(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) shard_of[size_t(r)] = reinterpret_cast<const char*>(window->peer(r));
  const int32_t* idx = indices.data_as<int32_t>();
  const int64_t n = indices.numel();
  sources.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const int o = owner(idx[i]);
    sources[size_t(i)] = shard_of[size_t(o)] + (idx[i] - begin[size_t(o)]) * int64_t(row_bytes);
  }
}

void ShardedTable::Impl::one_sided_copy_rows(const Tensor& out, int64_t from, int64_t to) const {
  const int64_t rb = int64_t(row_bytes);
  // Streaming stores only when the whole output cannot stay in the LLC (a layer reads it next).
  const bool stream = should_stream(out.shape(0) * out.shape(1) * rb);
  const Isa isa = active_isa();
  char* y = out.data_as<char>();
  const char* const* src = sources.data();
  parallel_ranges(to - from, std::max<int64_t>(1, kGrainBytes / rb), [&](int64_t a, int64_t b) {
    a += from, b += from;
    if (isa >= Isa::avx512) {
      kernels::gather_rows_avx512(y + a * rb, rb, src + a, b - a, rb, stream);
      return;
    }
    for (int64_t r = a; r < b; ++r) copy_bytes(isa, y + r * rb, src[r], rb, stream);
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
