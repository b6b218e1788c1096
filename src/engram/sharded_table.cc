// Sharded Engram tables. A lookup is three exchanges: how many rows each rank wants from each
// other rank (all_to_all, one count per peer; -1 announces bad indices, so every rank fails
// together instead of waiting for a peer that already threw), the wanted local row numbers
// (all_to_all_v), and the rows themselves (all_to_all_v, or batched send/recv for the async
// form). Indices are bucketed by owner with a counting sort; the output is filled by one
// gather from the received rows. Repeated indices are sent once per occurrence.
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "sol/engram.h"
#include "sol/error.h"

namespace sol::engram {

namespace {

// What one rank needs from a lookup, in owner order.
struct Plan {
  std::vector<int64_t> send_counts, recv_counts;  // indices to / requests from each rank
  std::vector<int32_t> requests_out;               // local row numbers, grouped by owner
  std::vector<int32_t> requests_in;                // rows peers want from this rank
  std::vector<int64_t> slot_of;                    // (t, h) -> position among received rows
  std::vector<std::byte> rows_out, rows_in;
};

}  // namespace

struct ShardedTable::Impl {
  comm::Group group;
  int64_t rows, dim;
  DType dtype;
  size_t row_bytes;
  std::vector<int64_t> begin;  // size + 1 boundaries
  Buffer shard;
  // Reused by every lookup: fresh buffers would cost a page fault per 4 KiB each call (in a
  // VM, more than the copies themselves). One lookup in flight at a time uses it.
  mutable Plan scratch;
  mutable bool in_flight = false;

  Impl(const comm::Group& g, int64_t rows_, int64_t dim_, DType dt)
      : group(g), rows(rows_), dim(dim_), dtype(dt), row_bytes(size_t(dim_) * dtype_size(dt)) {
    check(rows >= 1 && rows <= std::numeric_limits<int32_t>::max(), "engram lookup", "rows = ", rows,
          " but must be in 1..2^31-1");
    check(dim >= 1, "engram lookup", "dim = ", dim, " but must be >= 1");
    const int P = g.size();
    for (int r = 0; r <= P; ++r) begin.push_back(rows / P * r + std::min<int64_t>(r, rows % P));
    shard = Buffer(dt, {begin[size_t(g.rank()) + 1] - begin[size_t(g.rank())], dim});
  }

  int owner(int64_t row) const {
    const int P = group.size();
    const int64_t base = rows / P, extra = rows % P;
    if (row < extra * (base + 1)) return int(row / (base + 1));
    return int(extra + (row - extra * (base + 1)) / base);
  }

  void check_out(const Tensor& indices, const Tensor& out) const {
    check(indices.dtype() == DType::i32 && indices.ndim() == 2 && indices.is_contiguous(), "engram lookup",
          "indices must be a contiguous [T, H] i32 tensor, got ", indices.describe());
    check(out.dtype() == dtype && out.ndim() == 3 && out.is_contiguous() && out.shape(0) == indices.shape(0) &&
              out.shape(1) == indices.shape(1) && out.shape(2) == dim,
          "engram lookup", "out must be a contiguous [", indices.shape(0), ", ", indices.shape(1), ", ", dim, "] ",
          dtype_name(dtype), " tensor, got ", out.describe());
  }

  // Exchanges counts and requests and gathers the rows this rank sends.
  void plan(const Tensor& indices, Plan& p) const {
    const int P = group.size(), me = group.rank();
    const int32_t* idx = indices.data_as<int32_t>();
    const int64_t n = indices.numel();
    p.send_counts.assign(size_t(P), 0);
    int64_t bad = -1;
    for (int64_t i = 0; i < n; ++i) {
      if (idx[i] < 0 || idx[i] >= rows) {
        if (bad < 0) bad = i;
        continue;
      }
      ++p.send_counts[size_t(owner(idx[i]))];
    }
    std::vector<int32_t> counts_out(static_cast<size_t>(P)), counts_in(static_cast<size_t>(P));
    for (int r = 0; r < P; ++r) counts_out[size_t(r)] = bad >= 0 ? -1 : int32_t(p.send_counts[size_t(r)]);
    group.all_to_all(Tensor(counts_out.data(), DType::i32, {P}), Tensor(counts_in.data(), DType::i32, {P}));
    if (bad >= 0)
      fail("engram lookup", "indices[", bad / indices.shape(1), ", ", bad % indices.shape(1), "] = ", idx[bad],
           " is outside the table's rows 0..", rows - 1);
    for (int r = 0; r < P; ++r)
      if (counts_in[size_t(r)] < 0)
        fail("engram lookup", "rank ", r, " passed an index outside the table's rows 0..", rows - 1);
    p.recv_counts.assign(counts_in.begin(), counts_in.end());
    // Counting sort by owner: slot_of[i] is where row i comes back among the received rows.
    std::vector<int64_t> next(size_t(P), 0);
    for (int r = 1; r < P; ++r) next[size_t(r)] = next[size_t(r) - 1] + p.send_counts[size_t(r) - 1];
    p.requests_out.resize(size_t(n));
    p.slot_of.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i) {
      const int o = owner(idx[i]);
      const int64_t at = next[size_t(o)]++;
      p.requests_out[size_t(at)] = int32_t(idx[i] - begin[size_t(o)]);
      p.slot_of[size_t(i)] = at;
    }
    int64_t incoming = 0;
    for (int64_t c : p.recv_counts) incoming += c;
    p.requests_in.resize(size_t(incoming));
    group.all_to_all_v(Tensor(p.requests_out.data(), DType::i32, {n}), p.send_counts,
                       Tensor(p.requests_in.data(), DType::i32, {incoming}), p.recv_counts);
    // The rows peers asked for, in their order.
    p.rows_out.resize(size_t(incoming) * row_bytes);
    const std::byte* local = static_cast<const std::byte*>(shard.data());
    const int64_t local_rows = begin[size_t(me) + 1] - begin[size_t(me)];
    for (int64_t k = 0; k < incoming; ++k) {
      const int32_t r = p.requests_in[size_t(k)];
      check(r >= 0 && r < local_rows, "engram lookup", "a peer asked for local row ", r, " of ", local_rows,
            " (ranks disagree about the table)");
      std::memcpy(p.rows_out.data() + size_t(k) * row_bytes, local + size_t(r) * row_bytes, row_bytes);
    }
    p.rows_in.resize(size_t(n) * row_bytes);
  }

  void finish(const Plan& p, const Tensor& out) const {
    std::byte* y = static_cast<std::byte*>(out.data());
    for (size_t i = 0; i < p.slot_of.size(); ++i)
      std::memcpy(y + i * row_bytes, p.rows_in.data() + size_t(p.slot_of[i]) * row_bytes, row_bytes);
  }

  std::vector<int64_t> scaled(const std::vector<int64_t>& counts) const {
    std::vector<int64_t> s(counts);
    for (int64_t& c : s) c *= dim;
    return s;
  }
};

struct LookupHandle::State {
  std::function<void()> finish;  // the table's scatter into out

  comm::Work work;
  bool done = false;
};

LookupHandle::LookupHandle() = default;
LookupHandle::~LookupHandle() {
  if (state_ && !state_->done) {
    try {
      wait();
    } catch (const std::exception&) {
    }
  }
}
LookupHandle::LookupHandle(LookupHandle&&) noexcept = default;
LookupHandle& LookupHandle::operator=(LookupHandle&&) noexcept = default;

void LookupHandle::wait() {
  check(state_ != nullptr, "engram lookup", "wait() on an empty handle");
  if (state_->done) return;
  state_->work.wait();
  state_->done = true;
  state_->finish();
}

bool LookupHandle::test() {
  check(state_ != nullptr, "engram lookup", "test() on an empty handle");
  if (!state_->done && state_->work.completed()) {
    state_->done = true;
    state_->finish();
  }
  return state_->done;
}

ShardedTable::ShardedTable(const comm::Group& group, int64_t rows, int64_t dim, DType dtype)
    : impl_(std::make_unique<Impl>(group, rows, dim, dtype)) {}
ShardedTable::~ShardedTable() = default;
ShardedTable::ShardedTable(ShardedTable&&) noexcept = default;

int64_t ShardedTable::rows() const { return impl_->rows; }
int64_t ShardedTable::dim() const { return impl_->dim; }
int64_t ShardedTable::row_begin(int rank) const {
  check(rank >= 0 && rank <= impl_->group.size(), "engram lookup", "row_begin: rank ", rank, " outside 0..",
        impl_->group.size());
  return impl_->begin[size_t(rank)];
}
const Tensor& ShardedTable::local() const { return impl_->shard.tensor(); }

void ShardedTable::lookup(const Tensor& indices, const Tensor& out) const {
  const Impl& t = *impl_;
  t.check_out(indices, out);
  check(!t.in_flight, "engram lookup", "a lookup_async of this table is still in flight: wait() on it first");
  Plan& p = t.scratch;
  t.plan(indices, p);
  const int64_t sent = int64_t(p.requests_in.size()), received = indices.numel();
  t.group.all_to_all_v(Tensor(p.rows_out.data(), t.dtype, {sent * t.dim}), t.scaled(p.recv_counts),
                       Tensor(p.rows_in.data(), t.dtype, {received * t.dim}), t.scaled(p.send_counts));
  t.finish(p, out);
}

LookupHandle ShardedTable::lookup_async(const Tensor& indices, const Tensor& out) const {
  const Impl& t = *impl_;
  t.check_out(indices, out);
  check(!t.in_flight, "engram lookup", "a lookup_async of this table is still in flight: wait() on it first");
  LookupHandle h;
  h.state_ = std::make_unique<LookupHandle::State>();
  LookupHandle::State& s = *h.state_;
  Plan& plan = t.scratch;
  t.plan(indices, plan);
  t.in_flight = true;
  s.finish = [&t, out] {
    t.in_flight = false;
    t.finish(t.scratch, out);
  };
  const int P = t.group.size(), me = t.group.rank();
  std::vector<comm::P2POp> ops;
  int64_t out_at = 0, in_at = 0;
  for (int r = 0; r < P; ++r) {
    const int64_t send = plan.recv_counts[size_t(r)], recv = plan.send_counts[size_t(r)];
    std::byte* src = plan.rows_out.data() + size_t(out_at) * t.row_bytes;
    std::byte* dst = plan.rows_in.data() + size_t(in_at) * t.row_bytes;
    if (r == me) std::memcpy(dst, src, size_t(send) * t.row_bytes);
    else {
      if (send > 0) ops.push_back({comm::P2POp::send, Tensor(src, t.dtype, {send * t.dim}), r});
      if (recv > 0) ops.push_back({comm::P2POp::recv, Tensor(dst, t.dtype, {recv * t.dim}), r});
    }
    out_at += send;
    in_at += recv;
  }
  s.work = t.group.batch_isend_irecv(ops);
  return h;
}

}  // namespace sol::engram
