// Sharded Engram lookup across nodes: three exchanges. How many rows each rank wants from each
// other rank (all_to_all, one count per peer; -1 announces bad indices, so every rank fails
// together instead of waiting for a peer that already threw), the wanted local row numbers
// (all_to_all_v), and the rows themselves (all_to_all_v, or batched send/recv for the async
// form). Indices are bucketed by owner with a counting sort; the output is filled by one
// gather from the received rows. Repeated indices are sent once per occurrence.
#include <cstring>

#include "engram/table_impl.h"
#include "sol/error.h"

namespace sol::engram {

namespace {

using detail::ExchangePlan;

// Exchanges counts and requests and gathers the rows this rank sends.
void make_plan(const ShardedTable::Impl& t, const Tensor& indices, ExchangePlan& p) {
  const comm::Group& group = t.group;
  const int P = group.size(), me = group.rank();
  const int32_t* idx = indices.data_as<int32_t>();
  const int64_t n = indices.numel();
  const int64_t bad = t.first_bad_index(indices);
  p.send_counts.assign(size_t(P), 0);
  if (bad < 0)
    for (int64_t i = 0; i < n; ++i) ++p.send_counts[size_t(t.owner(idx[i]))];
  std::vector<int32_t> counts_out(static_cast<size_t>(P)), counts_in(static_cast<size_t>(P));
  for (int r = 0; r < P; ++r) counts_out[size_t(r)] = bad >= 0 ? -1 : int32_t(p.send_counts[size_t(r)]);
  group.all_to_all(Tensor(counts_out.data(), DType::i32, {P}), Tensor(counts_in.data(), DType::i32, {P}));
  if (bad >= 0) t.fail_bad_index(indices, bad);
  for (int r = 0; r < P; ++r)
    if (counts_in[size_t(r)] < 0)
      fail("engram lookup", "rank ", r, " passed an index outside the table's rows 0..", t.rows - 1);
  p.recv_counts.assign(counts_in.begin(), counts_in.end());
  // Counting sort by owner: slot_of[i] is where row i comes back among the received rows.
  std::vector<int64_t> next(size_t(P), 0);
  for (int r = 1; r < P; ++r) next[size_t(r)] = next[size_t(r) - 1] + p.send_counts[size_t(r) - 1];
  p.requests_out.resize(size_t(n));
  p.slot_of.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const int o = t.owner(idx[i]);
    const int64_t at = next[size_t(o)]++;
    p.requests_out[size_t(at)] = int32_t(idx[i] - t.begin[size_t(o)]);
    p.slot_of[size_t(i)] = at;
  }
  int64_t incoming = 0;
  for (int64_t c : p.recv_counts) incoming += c;
  p.requests_in.resize(size_t(incoming));
  group.all_to_all_v(Tensor(p.requests_out.data(), DType::i32, {n}), p.send_counts,
                     Tensor(p.requests_in.data(), DType::i32, {incoming}), p.recv_counts);
  // The rows peers asked for, in their order.
  p.rows_out.resize(size_t(incoming) * t.row_bytes);
  const std::byte* local = static_cast<const std::byte*>(t.shard.data());
  const int64_t local_rows = t.begin[size_t(me) + 1] - t.begin[size_t(me)];
  for (int64_t k = 0; k < incoming; ++k) {
    const int32_t r = p.requests_in[size_t(k)];
    check(r >= 0 && r < local_rows, "engram lookup", "a peer asked for local row ", r, " of ", local_rows,
          " (ranks disagree about the table)");
    std::memcpy(p.rows_out.data() + size_t(k) * t.row_bytes, local + size_t(r) * t.row_bytes, t.row_bytes);
  }
  p.rows_in.resize(size_t(n) * t.row_bytes);
}

void scatter_rows(const ShardedTable::Impl& t, const ExchangePlan& p, const Tensor& out) {
  std::byte* y = static_cast<std::byte*>(out.data());
  for (size_t i = 0; i < p.slot_of.size(); ++i)
    std::memcpy(y + i * t.row_bytes, p.rows_in.data() + size_t(p.slot_of[i]) * t.row_bytes, t.row_bytes);
}

std::vector<int64_t> times_dim(const std::vector<int64_t>& counts, int64_t dim) {
  std::vector<int64_t> s(counts);
  for (int64_t& c : s) c *= dim;
  return s;
}

struct ExchangeInFlight final : LookupHandle::State {
  const ShardedTable::Impl& table;
  Tensor out;
  comm::Work work;

  ExchangeInFlight(const ShardedTable::Impl& t, const Tensor& o) : table(t), out(o) {}
  void finish() {
    done = true;
    table.in_flight = false;
    scatter_rows(table, table.plan, out);
  }
  bool test() override {
    if (!done && work.completed()) finish();
    return done;
  }
  void wait() override {
    if (done) return;
    work.wait();
    finish();
  }
};

}  // namespace

void ShardedTable::Impl::exchange_lookup(const Tensor& indices, const Tensor& out) const {
  ExchangePlan& p = plan;
  make_plan(*this, indices, p);
  const int64_t sent = int64_t(p.requests_in.size()), received = indices.numel();
  group.all_to_all_v(Tensor(p.rows_out.data(), dtype, {sent * dim}), times_dim(p.recv_counts, dim),
                     Tensor(p.rows_in.data(), dtype, {received * dim}), times_dim(p.send_counts, dim));
  scatter_rows(*this, p, out);
}

std::unique_ptr<LookupHandle::State> ShardedTable::Impl::exchange_async(const Tensor& indices,
                                                                        const Tensor& out) const {
  ExchangePlan& p = plan;
  make_plan(*this, indices, p);
  auto s = std::make_unique<ExchangeInFlight>(*this, out);
  const int P = group.size(), me = group.rank();
  std::vector<comm::P2POp> ops;
  int64_t out_at = 0, in_at = 0;
  for (int r = 0; r < P; ++r) {
    const int64_t send = p.recv_counts[size_t(r)], recv = p.send_counts[size_t(r)];
    std::byte* src = p.rows_out.data() + size_t(out_at) * row_bytes;
    std::byte* dst = p.rows_in.data() + size_t(in_at) * row_bytes;
    // A rank may send itself nothing, and an empty plan's row buffers have no storage (null).
    if (r == me) {
      if (send > 0) std::memcpy(dst, src, size_t(send) * row_bytes);
    } else {
      if (send > 0) ops.push_back({comm::P2POp::send, Tensor(src, dtype, {send * dim}), r});
      if (recv > 0) ops.push_back({comm::P2POp::recv, Tensor(dst, dtype, {recv * dim}), r});
    }
    out_at += send;
    in_at += recv;
  }
  s->work = group.batch_isend_irecv(ops);
  in_flight = true;
  return s;
}

}  // namespace sol::engram
