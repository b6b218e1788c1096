// Hierarchical collectives: within the node through shared memory, across nodes through MPI
// only between ranks with the same local index, then within the node again. Scratch buffers
// are allocated per call here (the cross-node path is not yet allocation-free).
#include "comm/cross_node.h"

#include <vector>

#include "comm/local_collectives.h"
#include "comm/move_bytes.h"
#include "comm/mpi_transfers.h"
#include "comm/reduce.h"
#include "sol/copy.h"

namespace sol::comm::detail {

namespace {

using Bytes = std::vector<std::byte>;
std::byte* at(const void* p, size_t off) { return static_cast<std::byte*>(const_cast<void*>(p)) + off; }

// bf16 reductions that cross nodes run in f32 end to end and round once at the end, so the
// result does not depend on how the ranks are spread over nodes. Returns false for f32.
template <class Reduce>
bool widened(DType t, const void* in, int64_t in_count, void* out, int64_t out_count, Reduce&& reduce) {
  if (t != DType::bf16) return false;
  std::vector<float> wide_in(static_cast<size_t>(in_count)), wide_out(static_cast<size_t>(out_count));
  cast(Tensor(const_cast<void*>(in), DType::bf16, {in_count}), Tensor(wide_in.data(), DType::f32, {in_count}));
  reduce(wide_in.data(), wide_out.data());
  cast(Tensor(wide_out.data(), DType::f32, {out_count}), Tensor(out, DType::bf16, {out_count}));
  return true;
}

// The rank with local index j on node i.
int rank_at(const GroupState& s, int node, int j) { return s.ranks_of_node[size_t(node)][size_t(j)]; }

// Flat fallback: every rank exchanges block p of `in` with rank p over MPI (local peers too).
void flat_exchange(GroupState& s, std::string_view op, const void* in, size_t in_block, void* out,
                   size_t out_block, bool same_block_to_all) {
  std::vector<Transfer> sends, receives;
  for (int p = 0; p < s.size; ++p) {
    if (p == s.rank) continue;
    sends.push_back({p, at(in, same_block_to_all ? 0 : size_t(p) * in_block), in_block});
    receives.push_back({p, at(out, size_t(p) * out_block), out_block});
  }
  mpi_exchange(s, op, sends, receives);
}

}  // namespace

void cross_allreduce(GroupState& s, int local_index, void* data, int64_t count, DType t, ReduceOp op) {
  if (s.nodes == 1) return;
  const size_t bytes = size_t(count) * dtype_size(t);
  Bytes scratch(bytes * size_t(s.nodes));
  std::vector<Transfer> sends, receives;
  for (int i = 0; i < s.nodes; ++i) {
    if (i == s.node) continue;
    sends.push_back({rank_at(s, i, local_index), data, bytes});
    receives.push_back({rank_at(s, i, local_index), scratch.data() + size_t(i) * bytes, bytes});
  }
  mpi_exchange(s, "allreduce", sends, receives);
  std::vector<const void*> sources(static_cast<size_t>(s.nodes));
  for (int i = 0; i < s.nodes; ++i) sources[size_t(i)] = i == s.node ? data : scratch.data() + size_t(i) * bytes;
  reduce_sources(data, sources.data(), s.nodes, count, t, op);
}

void hierarchical_allreduce(GroupState& s, const void* in, void* out, int64_t count, DType t, ReduceOp op) {
  if (widened(t, in, count, out, count,
              [&](float* wide_in, float* wide_out) { hierarchical_allreduce(s, wide_in, wide_out, count, DType::f32, op); }))
    return;
  GroupState& local = s.local();
  if (s.uniform_nodes) {
    const int j = s.local_of[size_t(s.rank)];
    local_allreduce(local, in, out, count, t, op,
                    [&](void* part, int64_t n) { cross_allreduce(s, j, part, n, t, op); });
    return;
  }
  // Unequal nodes: every node reduces, the nodes' first ranks combine, each node copies out.
  local_allreduce(local, in, out, count, t, op);
  if (local.rank == 0) cross_allreduce(s, 0, out, count, t, op);
  local_broadcast(local, out, size_t(count) * dtype_size(t), 0);
}

void hierarchical_reduce_scatter(GroupState& s, const void* in, void* out, int64_t count, DType t,
                                 ReduceOp op) {
  if (widened(t, in, count * s.size, out, count, [&](float* wide_in, float* wide_out) {
        hierarchical_reduce_scatter(s, wide_in, wide_out, count, DType::f32, op);
      }))
    return;
  const size_t es = dtype_size(t), block = size_t(count) * es;
  const int N = s.nodes;
  if (!s.uniform_nodes) {
    Bytes received(block * size_t(s.size));
    flat_exchange(s, "reduce_scatter", in, block, received.data(), block, false);
    std::vector<const void*> sources(static_cast<size_t>(s.size));
    for (int p = 0; p < s.size; ++p)
      sources[size_t(p)] = p == s.rank ? at(in, size_t(s.rank) * block) : received.data() + size_t(p) * block;
    reduce_sources(out, sources.data(), s.size, count, t, op);
    return;
  }
  GroupState& local = s.local();
  const int j = s.local_of[size_t(s.rank)];
  // Order the blocks by (local index, node): the node-local reduce-scatter then leaves local
  // rank j the node's partial sums for every rank with local index j.
  Bytes by_local_index(block * size_t(s.size)), partial(block * size_t(N));
  for (int g = 0; g < s.size; ++g)
    move_bytes(by_local_index.data() + (size_t(s.local_of[size_t(g)]) * size_t(N) + size_t(s.node_of[size_t(g)])) * block,
               at(in, size_t(g) * block), block);
  local_reduce_scatter(local, by_local_index.data(), partial.data(), count * N, t, op);
  Bytes received(block * size_t(N));
  std::vector<Transfer> sends, receives;
  for (int i = 0; i < N; ++i) {
    if (i == s.node) continue;
    sends.push_back({rank_at(s, i, j), partial.data() + size_t(i) * block, block});
    receives.push_back({rank_at(s, i, j), received.data() + size_t(i) * block, block});
  }
  mpi_exchange(s, "reduce_scatter", sends, receives);
  std::vector<const void*> sources(static_cast<size_t>(N));
  for (int i = 0; i < N; ++i)
    sources[size_t(i)] = i == s.node ? partial.data() + size_t(i) * block : received.data() + size_t(i) * block;
  reduce_sources(out, sources.data(), N, count, t, op);
}

void hierarchical_all_gather(GroupState& s, const void* in, void* out, size_t bytes) {
  const int N = s.nodes;
  if (!s.uniform_nodes) {
    flat_exchange(s, "all_gather", in, bytes, out, bytes, true);
    move_bytes(at(out, size_t(s.rank) * bytes), in, bytes);
    return;
  }
  GroupState& local = s.local();
  const int L = local.size, j = s.local_of[size_t(s.rank)];
  // Across nodes first (same local index), then the node gathers those collections.
  Bytes across(bytes * size_t(N)), gathered(bytes * size_t(N) * size_t(L));
  std::vector<Transfer> sends, receives;
  for (int i = 0; i < N; ++i) {
    if (i == s.node) continue;
    sends.push_back({rank_at(s, i, j), const_cast<void*>(in), bytes});
    receives.push_back({rank_at(s, i, j), across.data() + size_t(i) * bytes, bytes});
  }
  mpi_exchange(s, "all_gather", sends, receives);
  move_bytes(across.data() + size_t(s.node) * bytes, in, bytes);
  local_all_gather(local, across.data(), gathered.data(), bytes * size_t(N));
  for (int jj = 0; jj < L; ++jj)
    for (int i = 0; i < N; ++i)
      move_bytes(at(out, size_t(rank_at(s, i, jj)) * bytes),
                 gathered.data() + (size_t(jj) * size_t(N) + size_t(i)) * bytes, bytes);
}

void hierarchical_all_to_all_v(GroupState& s, StepOp op, const void* in, const uint64_t* send_bytes,
                               void* out, const uint64_t* recv_bytes) {
  const std::string_view name = step_op_name(op);
  std::vector<uint64_t> send_offset(size_t(s.size) + 1, 0), recv_offset(size_t(s.size) + 1, 0);
  for (int p = 0; p < s.size; ++p) {
    send_offset[size_t(p) + 1] = send_offset[size_t(p)] + send_bytes[p];
    recv_offset[size_t(p) + 1] = recv_offset[size_t(p)] + recv_bytes[p];
  }
  // Remote blocks go straight over MPI while the node exchanges its own blocks in memory.
  PostedRequests posted;
  for (int p = 0; p < s.size; ++p)
    if (s.node_of[size_t(p)] != s.node) post_receive(s, {p, at(out, recv_offset[size_t(p)]), recv_bytes[p]}, posted);
  for (int p = 0; p < s.size; ++p)
    if (s.node_of[size_t(p)] != s.node) post_send(s, {p, at(in, send_offset[size_t(p)]), send_bytes[p]}, posted);
  const std::vector<int>& mine = s.ranks_of_node[size_t(s.node)];
  const size_t L = mine.size();
  std::vector<uint64_t> local_send(L), local_recv(L);
  uint64_t send_total = 0, recv_total = 0;
  for (size_t k = 0; k < L; ++k) {
    local_send[k] = send_bytes[mine[k]];
    local_recv[k] = recv_bytes[mine[k]];
    send_total += local_send[k];
    recv_total += local_recv[k];
  }
  Bytes packed(send_total), unpacked(recv_total);
  for (size_t k = 0, off = 0; k < L; off += local_send[k], ++k)
    move_bytes(packed.data() + off, at(in, send_offset[size_t(mine[k])]), local_send[k]);
  local_all_to_all_v(s.local(), op, packed.data(), local_send.data(), unpacked.data(), local_recv.data());
  for (size_t k = 0, off = 0; k < L; off += local_recv[k], ++k)
    move_bytes(at(out, recv_offset[size_t(mine[k])]), unpacked.data() + off, local_recv[k]);
  wait_all(posted, name);
}

void hierarchical_broadcast(GroupState& s, void* buffer, size_t bytes, int root) {
  const int root_node = s.node_of[size_t(root)];
  PostedRequests posted;
  if (s.rank == root)
    for (int i = 0; i < s.nodes; ++i)
      if (i != root_node) post_send(s, {rank_at(s, i, 0), buffer, bytes}, posted);
  const bool receives_for_node = s.node != root_node && s.local_of[size_t(s.rank)] == 0;
  if (receives_for_node) {
    post_receive(s, {root, buffer, bytes}, posted);
    wait_all(posted, "broadcast");
  }
  local_broadcast(s.local(), buffer, bytes, s.node == root_node ? s.local_of[size_t(root)] : 0);
  wait_all(posted, "broadcast");
}

void hierarchical_barrier(GroupState& s) {
  GroupState& local = s.local();
  local_barrier(local, "barrier");
  if (local.rank == 0) {
    std::vector<Transfer> sends, receives;
    char token = 0;
    std::vector<char> tokens(static_cast<size_t>(s.nodes));
    for (int i = 0; i < s.nodes; ++i) {
      if (i == s.node) continue;
      sends.push_back({rank_at(s, i, 0), &token, 1});
      receives.push_back({rank_at(s, i, 0), &tokens[size_t(i)], 1});
    }
    mpi_exchange(s, "barrier", sends, receives);
  }
  local_barrier(local, "barrier");
}

}  // namespace sol::comm::detail
