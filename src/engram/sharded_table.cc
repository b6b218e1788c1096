// ShardedTable and LookupHandle: construction, argument checks, index agreement, and the
// choice between the one-sided path (one node) and the exchange path (across nodes); see
// table_impl.h.
#include <limits>

#include "comm/world.h"
#include "engram/table_impl.h"
#include "sol/error.h"

namespace sol::engram {

ShardedTable::Impl::Impl(const comm::Group& g, int64_t rows_, int64_t dim_, DType dt)
    : group(g), rows(rows_), dim(dim_), dtype(dt), row_bytes(size_t(dim_) * dtype_size(dt)) {
  check(rows >= 1 && rows <= std::numeric_limits<int32_t>::max(), "engram lookup", "rows = ", rows,
        " but must be in 1..2^31-1");
  check(dim >= 1, "engram lookup", "dim = ", dim, " but must be >= 1");
  const int P = g.size();
  for (int r = 0; r <= P; ++r) begin.push_back(rows / P * r + std::min<int64_t>(r, rows % P));
  map.base = rows / P, map.extra = rows % P, map.split = map.extra * (map.base + 1);
  map.inv_big = 1.0 / double(map.base + 1);
  map.inv_base = map.base > 0 ? 1.0 / double(map.base) : 0;
  map.row_bytes = row_bytes;
  const int64_t local_rows = begin[size_t(g.rank()) + 1] - begin[size_t(g.rank())];
  if (g.num_nodes() == 1) {
    flag_offset = (size_t(map.base + (map.extra > 0)) * row_bytes + 63) / 64 * 64;
    window.emplace(g, flag_offset + 64);
    shard = Tensor(window->local(), dt, {local_rows, dim});
    for (int r = 0; r < P; ++r)
      origin.push_back(reinterpret_cast<uintptr_t>(window->peer(r)) - uintptr_t(begin[size_t(r)]) * row_bytes);
    map.origin = origin.data();
  } else {
    exchange_shard = Buffer(dt, {local_rows, dim});
    shard = exchange_shard.tensor();
  }
}

void ShardedTable::Impl::check_args(const Tensor& indices, const Tensor& out) const {
  // `if` rather than check(): the messages format the tensors, which costs a microsecond per call.
  if (indices.dtype() != DType::i32 || indices.ndim() != 2 || !indices.is_contiguous())
    fail("engram lookup", "indices must be a contiguous [T, H] i32 tensor, got ", describe_text(indices));
  if (out.dtype() != dtype || out.ndim() != 3 || !out.is_contiguous() || out.shape(0) != indices.shape(0) ||
      out.shape(1) != indices.shape(1) || out.shape(2) != dim)
    fail("engram lookup", "out must be a contiguous [", indices.shape(0), ", ", indices.shape(1), ", ", dim, "] ",
         dtype_name(dtype), " tensor, got ", describe_text(out));
  check(!in_flight, "engram lookup", "a lookup_async of this table is still in flight: wait() on it first");
}

int64_t ShardedTable::Impl::first_bad_index(const Tensor& indices) const {
  const int32_t* idx = indices.data_as<int32_t>();
  const int64_t n = indices.numel();
  for (int64_t i = 0; i < n; ++i)
    if (idx[i] < 0 || idx[i] >= rows) return i;
  return -1;
}

void ShardedTable::Impl::fail_bad_index(const Tensor& indices, int64_t at) const {
  fail("engram lookup", "indices[", at / indices.shape(1), ", ", at % indices.shape(1),
       "] = ", indices.data_as<int32_t>()[at], " is outside the table's rows 0..", rows - 1);
}

namespace {

// A handle dropped (destroyed or overwritten) with its lookup in flight still completes it:
// peers wait for this rank at the lookup's end, and the table stays usable. Not after a comm
// failure in this process (as comm::Work): its peers are gone or stopped, and a second wait
// would only cost another whole SOL_COMM_TIMEOUT_S before the error reaches anyone.
void finish_dropped(std::unique_ptr<LookupHandle::State>& state) {
  if (!state || state->done || comm::detail::process_failed()) return;
  try {
    state->wait();
  } catch (const std::exception&) {
  }
}

}  // namespace

LookupHandle::LookupHandle() = default;
LookupHandle::~LookupHandle() { finish_dropped(state_); }
LookupHandle::LookupHandle(LookupHandle&&) noexcept = default;
LookupHandle& LookupHandle::operator=(LookupHandle&& other) noexcept {
  if (this != &other) {
    finish_dropped(state_);
    state_ = std::move(other.state_);
  }
  return *this;
}

void LookupHandle::wait() {
  check(state_ != nullptr, "engram lookup", "wait() on an empty handle");
  state_->wait();
}

bool LookupHandle::test() {
  check(state_ != nullptr, "engram lookup", "test() on an empty handle");
  return state_->test();
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
const Tensor& ShardedTable::local() const { return impl_->shard; }
bool ShardedTable::one_sided() const { return impl_->one_sided(); }

void ShardedTable::lookup(const Tensor& indices, const Tensor& out) const {
  const Impl& t = *impl_;
  t.check_args(indices, out);
  if (t.one_sided()) t.one_sided_lookup(indices, out);
  else t.exchange_lookup(indices, out);
}

LookupHandle ShardedTable::lookup_async(const Tensor& indices, const Tensor& out) const {
  const Impl& t = *impl_;
  t.check_args(indices, out);
  LookupHandle h;
  h.state_ = t.one_sided() ? t.one_sided_async(indices, out) : t.exchange_async(indices, out);
  return h;
}

}  // namespace sol::engram
