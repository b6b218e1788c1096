#pragma once
// What a ShardedTable is underneath, and its two lookup paths:
//   - one node (every rank shares memory): the shards live in a comm::Window and each rank
//     copies the rows it asked for straight out of their owners' shards into its output — one
//     copy per row, no index exchange (lookup_one_sided.cc);
//   - across nodes: indices and rows are exchanged with all_to_all_v or batched send/recv
//     (lookup_exchange.cc).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/engram_rows.h"
#include "sol/comm.h"
#include "sol/comm_window.h"
#include "sol/engram.h"
#include "sol/tensor.h"

namespace sol::engram {

// A lookup in flight, as LookupHandle sees it.
struct LookupHandle::State {
  virtual ~State() = default;
  virtual bool test() = 0;  // moves what it can without blocking; true once complete
  virtual void wait() = 0;
  bool done = false;
};

namespace detail {

// The exchange path's scratch, reused by every lookup: fresh buffers would cost a page fault
// per 4 KiB each call (in a VM, more than the copies themselves).
struct ExchangePlan {
  std::vector<int64_t> send_counts, recv_counts;  // indices to / requests from each rank
  std::vector<int32_t> requests_out;               // local row numbers, grouped by owner
  std::vector<int32_t> requests_in;                // rows peers want from this rank
  std::vector<int64_t> slot_of;                    // (t, h) -> position among received rows
  std::vector<std::byte> rows_out, rows_in;
};

}  // namespace detail

struct ShardedTable::Impl {
  comm::Group group;
  int64_t rows, dim;
  DType dtype;
  size_t row_bytes;
  std::vector<int64_t> begin;  // size + 1 boundaries
  detail::RowMap map;              // owners and (one node) row addresses; map.origin -> origin
  std::vector<uintptr_t> origin;   // one node: per owner, see row_sources.h
  // One node: the shards, readable by every rank, each followed (at flag_offset, the same in
  // every region) by the rank's "bad index" flag of the lookup in progress.
  std::optional<comm::Window> window;
  size_t flag_offset = 0;
  Buffer exchange_shard;               // across nodes: this rank's rows
  Tensor shard;                        // view of this rank's rows, in one or the other
  // One lookup in flight at a time uses the scratch below.
  mutable detail::ExchangePlan plan;
  mutable std::vector<const char*> sources;  // one-sided: each output row's source row
  mutable bool in_flight = false;

  Impl(const comm::Group& g, int64_t rows, int64_t dim, DType dtype);

  bool one_sided() const { return window.has_value(); }
  int owner(int64_t row) const { return map.owner(row); }
  void check_args(const Tensor& indices, const Tensor& out) const;
  // Position of the first index outside [0, rows), or -1.
  int64_t first_bad_index(const Tensor& indices) const;
  [[noreturn]] void fail_bad_index(const Tensor& indices, int64_t at) const;

  // One-sided path (lookup_one_sided.cc). start: resolves each output row's source and agrees
  // on bad indices with every rank through a fence (so a bad index makes every rank throw and
  // nobody waits at a later fence for a rank that already threw; the fence also publishes the
  // owners' earlier writes of their shards); copy_rows: output rows [from, to); the lookup
  // ends with another fence, after which owners may rewrite their shards.
  void one_sided_start(const Tensor& indices) const;
  void one_sided_copy_rows(const Tensor& out, int64_t from, int64_t to) const;
  void one_sided_lookup(const Tensor& indices, const Tensor& out) const;
  std::unique_ptr<LookupHandle::State> one_sided_async(const Tensor& indices, const Tensor& out) const;

  // Exchange path (lookup_exchange.cc).
  void exchange_lookup(const Tensor& indices, const Tensor& out) const;
  std::unique_ptr<LookupHandle::State> exchange_async(const Tensor& indices, const Tensor& out) const;
};

}  // namespace sol::engram
