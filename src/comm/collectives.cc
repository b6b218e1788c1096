// The public collectives: argument checks, then the node-local algorithm or the hierarchical
// one when the group spans nodes.
#include <vector>

#include "comm/cross_node.h"
#include "comm/local_collectives.h"
#include "comm/reduce.h"
#include "sol/comm.h"

namespace sol::comm {

using namespace detail;

namespace {

// Branches first: the messages are built only on failure (an 8-byte allreduce takes ~1 us).
void require_buffer(std::string_view op, std::string_view arg, const Tensor& t) {
  if (!t.is_contiguous()) fail(op, arg, " must be contiguous, got ", describe_text(t));
  if (!t.empty() && t.data() == nullptr) fail(op, arg, " has ", t.numel(), " elements but no data");
}

void require_reducible(std::string_view op, const Tensor& in, const Tensor& out) {
  if (in.dtype() != out.dtype())
    fail(op, "in.dtype = ", dtype_name(in.dtype()), " but out.dtype = ", dtype_name(out.dtype()));
  if (!reducible(in.dtype())) fail(op, "dtype ", dtype_name(in.dtype()), " cannot be reduced: expected f32 or bf16");
}

}  // namespace

void Group::allreduce(const Tensor& in, const Tensor& out, ReduceOp op) const {
  require_buffer("allreduce", "in", in);
  require_buffer("allreduce", "out", out);
  require_reducible("allreduce", in, out);
  check(in.numel() == out.numel(), "allreduce", "in has ", in.numel(), " elements but out has ", out.numel());
  GroupState& s = *state_;
  if (s.single_node()) local_allreduce(s, in.data(), out.data(), in.numel(), in.dtype(), op);
  else hierarchical_allreduce(s, in.data(), out.data(), in.numel(), in.dtype(), op);
}

void Group::reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) const {
  require_buffer("reduce_scatter", "in", in);
  require_buffer("reduce_scatter", "out", out);
  require_reducible("reduce_scatter", in, out);
  check(in.numel() == out.numel() * size(), "reduce_scatter", "in has ", in.numel(),
        " elements but must hold size() = ", size(), " blocks of out.numel() = ", out.numel());
  GroupState& s = *state_;
  if (s.single_node()) local_reduce_scatter(s, in.data(), out.data(), out.numel(), in.dtype(), op);
  else hierarchical_reduce_scatter(s, in.data(), out.data(), out.numel(), in.dtype(), op);
}

void Group::all_gather(const Tensor& in, const Tensor& out) const {
  require_buffer("all_gather", "in", in);
  require_buffer("all_gather", "out", out);
  check(in.dtype() == out.dtype(), "all_gather", "in.dtype = ", dtype_name(in.dtype()),
        " but out.dtype = ", dtype_name(out.dtype()));
  check(out.numel() == in.numel() * size(), "all_gather", "out has ", out.numel(),
        " elements but must hold size() = ", size(), " blocks of in.numel() = ", in.numel());
  GroupState& s = *state_;
  if (s.single_node()) local_all_gather(s, in.data(), out.data(), size_t(in.nbytes()));
  else hierarchical_all_gather(s, in.data(), out.data(), size_t(in.nbytes()));
}

namespace {

void all_to_all_bytes(GroupState& s, StepOp op, const Tensor& in, const std::vector<uint64_t>& send,
                      const Tensor& out, const std::vector<uint64_t>& recv) {
  if (s.single_node()) local_all_to_all_v(s, op, in.data(), send.data(), out.data(), recv.data());
  else hierarchical_all_to_all_v(s, op, in.data(), send.data(), out.data(), recv.data());
}

}  // namespace

void Group::all_to_all(const Tensor& in, const Tensor& out) const {
  require_buffer("all_to_all", "in", in);
  require_buffer("all_to_all", "out", out);
  check(in.dtype() == out.dtype(), "all_to_all", "in.dtype = ", dtype_name(in.dtype()),
        " but out.dtype = ", dtype_name(out.dtype()));
  check(in.numel() == out.numel(), "all_to_all", "in has ", in.numel(), " elements but out has ", out.numel());
  check(in.numel() % size() == 0, "all_to_all", "in has ", in.numel(),
        " elements, not a multiple of size() = ", size());
  std::vector<uint64_t> block(size_t(size()), uint64_t(in.nbytes() / size()));
  all_to_all_bytes(*state_, StepOp::all_to_all, in, block, out, block);
}

void Group::all_to_all_v(const Tensor& in, std::span<const int64_t> send_counts, const Tensor& out,
                         std::span<const int64_t> recv_counts) const {
  require_buffer("all_to_all_v", "in", in);
  require_buffer("all_to_all_v", "out", out);
  check(in.dtype() == out.dtype(), "all_to_all_v", "in.dtype = ", dtype_name(in.dtype()),
        " but out.dtype = ", dtype_name(out.dtype()));
  check(send_counts.size() == size_t(size()), "all_to_all_v", "send_counts has ", send_counts.size(),
        " entries but the group has ", size(), " ranks");
  check(recv_counts.size() == size_t(size()), "all_to_all_v", "recv_counts has ", recv_counts.size(),
        " entries but the group has ", size(), " ranks");
  const uint64_t es = dtype_size(in.dtype());
  const size_t ranks = size_t(size());
  std::vector<uint64_t> send(ranks), recv(ranks);
  int64_t send_total = 0, recv_total = 0;
  for (int p = 0; p < size(); ++p) {
    check(send_counts[size_t(p)] >= 0 && recv_counts[size_t(p)] >= 0, "all_to_all_v", "counts for rank ", p,
          " are negative: send ", send_counts[size_t(p)], ", recv ", recv_counts[size_t(p)]);
    send[size_t(p)] = uint64_t(send_counts[size_t(p)]) * es;
    recv[size_t(p)] = uint64_t(recv_counts[size_t(p)]) * es;
    send_total += send_counts[size_t(p)];
    recv_total += recv_counts[size_t(p)];
  }
  check(send_total <= in.numel(), "all_to_all_v", "send_counts add up to ", send_total,
        " elements but in has ", in.numel());
  check(recv_total <= out.numel(), "all_to_all_v", "recv_counts add up to ", recv_total,
        " elements but out has ", out.numel());
  all_to_all_bytes(*state_, StepOp::all_to_all_v, in, send, out, recv);
}

void Group::broadcast(const Tensor& buffer, int root) const {
  require_buffer("broadcast", "buffer", buffer);
  check(root >= 0 && root < size(), "broadcast", "root = ", root, " but the group has ", size(), " ranks");
  GroupState& s = *state_;
  if (s.single_node()) local_broadcast(s, buffer.data(), size_t(buffer.nbytes()), root);
  else hierarchical_broadcast(s, buffer.data(), size_t(buffer.nbytes()), root);
}

void Group::barrier() const {
  GroupState& s = *state_;
  if (s.single_node()) local_barrier(s, "barrier");
  else hierarchical_barrier(s);
}

}  // namespace sol::comm
