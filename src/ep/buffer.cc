// ep::Buffer: validating the configuration, agreeing on it across ranks, and laying out every
// region once, so no later call allocates.
#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>

#include "comm/heap_peers.h"
#include "ep/buffer_state.h"
#include "sol/error.h"
#include "sol/timing.h"

namespace sol::ep {

namespace {

constexpr size_t kAlign = 4096;

size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

Flags& Buffer::State::flags_of(int p) const {
  return *reinterpret_cast<Flags*>(peer(p, 0));
}

std::byte* Buffer::State::peer(int p, size_t offset) const {
  if (p == me) return heap + offset;
  return comm::detail::heap_peer_address(local, heap, local_of[size_t(p)]) + offset;
}

// A peer that is running raises its flag within microseconds; one that is not running needs a
// core, maybe this one (ranks often share cores with each other and with other jobs). comm's
// wait spins 4096 pauses before it first yields, ≈ 100 µs on Zen 5 (≈ 24 ns per pause), which
// was the low-latency combine's "fixed cost" whenever the peer was descheduled. So: spin ≈ 3 µs,
// then yield; after 50 ms hand over to comm's bounded wait (deadline, dead-peer check).
void Buffer::State::wait_flag(int p, const Flag& flag, uint64_t value, const char* op,
                              const char* what) const {
  constexpr int kSpinPauses = 128;
  auto ready = [&] { return flag.value.load(std::memory_order_acquire) >= value; };
  for (int i = 0; i < kSpinPauses; ++i) {
    if (ready()) return;
    _mm_pause();
  }
  const double start = now_seconds();
  do {
    for (int i = 0; i < 16; ++i) {
      if (ready()) return;
      sched_yield();
    }
  } while (now_seconds() - start < 0.05);
  comm::detail::wait_flag_at_least(local, flag.value, value, local_of[size_t(p)], op, what);
}

void Buffer::State::node_round(Flag Flags::*flag, uint64_t value, const char* op, const char* what) const {
  (flags().*flag).value.store(value, std::memory_order_release);
  for (int p : ranks_of_node[size_t(my_node)])
    if (p != me) wait_flag(p, flags_of(p).*flag, value, op, what);
}

const Traffic& Buffer::last_dispatch_traffic() const { return state_->dispatch_traffic; }
const Traffic& Buffer::last_combine_traffic() const { return state_->combine_traffic; }

Buffer::Buffer(const comm::Group& group, const BufferConfig& c) : group_(group), config_(c) {
  const char* op = "ep::Buffer";
  const int R = group.size();
  check(c.hidden > 0, op, "hidden = ", c.hidden, " but must be > 0");
  check(c.dtype == DType::bf16 || c.dtype == DType::f8e4m3, op, "dtype = ", dtype_name(c.dtype),
        ": expected bf16 or f8e4m3");
  check(c.dtype != DType::f8e4m3 || c.hidden % 128 == 0, op, "hidden = ", c.hidden,
        " must be a multiple of 128 for f8e4m3 payloads (one scale per 1x128 block)");
  check(c.num_experts > 0 && c.num_experts % R == 0, op, "num_experts = ", c.num_experts,
        " must be a positive multiple of the group's ", R, " ranks");
  check(c.top_k > 0 && c.top_k <= c.num_experts, op, "top_k = ", c.top_k, " must be in [1, num_experts = ",
        c.num_experts, "]");
  check(c.max_tokens_per_rank >= 0 && c.low_latency_max_tokens >= 0, op,
        "max_tokens_per_rank = ", c.max_tokens_per_rank, " and low_latency_max_tokens = ",
        c.low_latency_max_tokens, " must be >= 0");
  check(c.max_tokens_per_rank <= (int64_t(1) << 30) / R && c.low_latency_max_tokens <= (int64_t(1) << 30) / R,
        op, "token capacities times ranks must fit in 32 bits");

  // Every rank must build the same buffer: the regions sit at the same offsets everywhere.
  int64_t mine[6] = {c.hidden, c.num_experts, c.top_k, int64_t(c.dtype), c.max_tokens_per_rank,
                     c.low_latency_max_tokens};
  std::vector<int64_t> all(size_t(6 * R));
  group.all_gather(Tensor(mine, DType::i8, {int64_t(sizeof mine)}),
                   Tensor(all.data(), DType::i8, {int64_t(sizeof mine) * R}));
  for (int p = 0; p < R; ++p)
    for (int i = 0; i < 6; ++i)
      if (all[size_t(6 * p + i)] != mine[i])
        throw CommError(std::string(op) + ": ranks disagree on the configuration: rank " +
                        std::to_string(p) + " passed " + std::to_string(all[size_t(6 * p + i)]) +
                        " where rank " + std::to_string(group.rank()) + " passed " +
                        std::to_string(mine[i]) + " (field " + std::to_string(i) +
                        " of hidden, num_experts, top_k, dtype, max_tokens_per_rank, "
                        "low_latency_max_tokens)");

  state_ = std::make_unique<State>(group, group.num_nodes() == 1 ? group : group.local());
  State& s = *state_;
  // Where every rank lives: (node, local index, rank in the cross group), through the public API.
  {
    int32_t where[3] = {group.node(), group.local().rank(), group.cross().rank()};
    std::vector<int32_t> every(size_t(3 * R));
    group.all_gather(Tensor(where, DType::i32, {3}), Tensor(every.data(), DType::i32, {int64_t(3 * R)}));
    s.N = group.num_nodes();
    s.my_node = where[0];
    s.my_local = where[1];
    s.node_of.resize(size_t(R));
    s.local_of.resize(size_t(R));
    s.ranks_of_node.assign(size_t(s.N), {});
    for (int p = 0; p < R; ++p) {
      s.node_of[size_t(p)] = every[size_t(3 * p)];
      s.local_of[size_t(p)] = every[size_t(3 * p + 1)];
    }
    for (auto& members : s.ranks_of_node) members.assign(size_t(R), -1);
    bool uniform = true;
    std::vector<int> node_size(size_t(s.N), 0);
    for (int p = 0; p < R; ++p) {
      ++node_size[size_t(s.node_of[size_t(p)])];
      s.ranks_of_node[size_t(s.node_of[size_t(p)])][size_t(s.local_of[size_t(p)])] = p;
    }
    for (int n = 0; n < s.N; ++n) {
      uniform &= node_size[size_t(n)] == node_size[0];
      s.ranks_of_node[size_t(n)].resize(size_t(node_size[size_t(n)]));
    }
    s.G = node_size[size_t(s.my_node)];
    s.path = s.N == 1 ? Path::one_node : uniform ? Path::hierarchical : Path::flat_mpi;
    if (s.path == Path::hierarchical) {
      s.cross_rank_of_node.resize(size_t(s.N));
      s.node_of_cross_rank.assign(size_t(s.N), -1);
      for (int n = 0; n < s.N; ++n) {
        const int c = every[size_t(3 * s.ranks_of_node[size_t(n)][size_t(s.my_local)] + 2)];
        s.cross_rank_of_node[size_t(n)] = c;
        if (c < 0 || c >= s.N || s.node_of_cross_rank[size_t(c)] >= 0)
          throw CommError(std::string(op) + ": the group's cross-node group does not hold one rank per node");
        s.node_of_cross_rank[size_t(c)] = n;
      }
    }
  }
  s.R = R;
  s.me = group.rank();
  s.H = c.hidden;
  s.E = c.num_experts;
  s.K = c.top_k;
  s.L = c.num_experts / R;
  local_experts_ = s.L;
  s.fp8 = c.dtype == DType::f8e4m3;
  s.row_bytes = c.hidden * int64_t(dtype_size(c.dtype));
  s.scale_cols = s.fp8 ? c.hidden / 128 : 0;
  s.shared = s.path != Path::flat_mpi;
  s.max_tokens = c.max_tokens_per_rank;
  s.cap = int64_t(R) * s.max_tokens;
  s.ll_max = c.low_latency_max_tokens;
  s.ll_slots = int64_t(R) * s.ll_max;
  check(s.ll_max == 0 || s.path == Path::one_node, op, "low-latency mode needs every rank on one node; the group spans ",
        group.num_nodes(), " nodes");

  size_t total = round_up(sizeof(Flags));
  auto take = [&](size_t bytes) {
    size_t at = total;
    total += round_up(bytes);
    return at;
  };
  const size_t cap = size_t(s.cap), K = size_t(s.K);
  if (s.max_tokens > 0) {
    for (auto& m : s.off_meta) m = take(size_t(R + s.E) * 4);
    s.off_recv_x = take(cap * size_t(s.row_bytes));
    s.off_recv_scales = take(cap * size_t(s.scale_cols) * 4);
    s.off_recv_idx = take(cap * K * 4);
    s.off_recv_w = take(cap * K * 4);
    s.off_combine = take(cap * size_t(s.H) * 2);
    if (s.path == Path::flat_mpi) {
      s.off_send_x = take(cap * size_t(s.row_bytes));
      s.off_send_scales = take(cap * size_t(s.scale_cols) * 4);
      s.off_send_idx = take(cap * K * 4);
      s.off_send_w = take(cap * K * 4);
    }
  }
  if (s.ll_max > 0) {
    const size_t rows = size_t(s.L) * size_t(s.ll_slots);
    for (int b = 0; b < 2; ++b) {
      s.off_ll_meta[b] = take(size_t(s.E) * 4);
      s.off_ll_x[b] = take(rows * size_t(s.row_bytes));
      s.off_ll_scales[b] = take(rows * size_t(s.scale_cols) * 4);
      s.off_ll_src[b] = take(rows * 4);
      s.off_ll_combine[b] = take(size_t(s.ll_max) * K * size_t(s.H) * 2);
    }
  }

  if (s.shared) {
    try {
      s.heap = static_cast<std::byte*>(group.heap_alloc(total));
    } catch (const CommError&) {
      throw;
    } catch (const Error& e) {
      throw Error(std::string(op) + ": needs " + std::to_string(total >> 20) +
                  " MiB of the symmetric heap per rank (hidden " + std::to_string(c.hidden) +
                  ", max_tokens_per_rank " + std::to_string(c.max_tokens_per_rank) +
                  ", low_latency_max_tokens " + std::to_string(c.low_latency_max_tokens) + "): " + e.what());
    }
    // Heap memory may hold an earlier buffer's flags: start from zero, and let no peer raise a
    // flag before every rank has cleared its own.
    std::memset(s.heap, 0, round_up(sizeof(Flags)));
    new (s.heap) Flags();
    group.barrier();
  } else {
    s.private_memory.resize(total);
    s.heap = s.private_memory.data();
  }

  if (s.path == Path::hierarchical && s.max_tokens > 0) {
    // Records of this rank's tokens to the other nodes, and of theirs to this one; combine's
    // bf16 rows fit in the same space.
    const size_t rec = std::max(size_t(s.row_bytes + s.scale_cols * 4 + 8 * s.K), size_t(2 * s.H));
    const size_t rows = size_t(s.N - 1) * size_t(s.max_tokens);
    s.stage_out.resize(rows * rec);
    s.stage_in.resize(rows * rec);
    s.count_row.assign(size_t(R + s.N), 0);
    s.count_rows.assign(size_t(R) * size_t(R + s.N), 0);
  }
  s.tokens_per_rank.assign(size_t(R), 0);
  s.tokens_per_node.assign(size_t(group.num_nodes()), 0);
  s.tokens_per_expert.assign(size_t(s.E), 0);
  s.expert_scratch.assign(size_t(s.E), 0);
  s.in_rank.assign(size_t(s.max_tokens) * size_t(R), 0);
  s.recv_per_expert.assign(size_t(s.L), 0);
  s.recv_offset.assign(size_t(R) + 1, 0);
  s.scratch_counts.assign(size_t(R), 0);
  s.count_matrix.assign(size_t(R) * size_t(R), 0);
  for (auto& v : s.ll_count) v.assign(size_t(s.L), 0);
  for (auto& v : s.ll_block) v.assign(size_t(s.L) * size_t(R + 1), 0);
  s.ll_expert_counts.assign(size_t(s.E), 0);
  s.ll_offsets.assign(size_t(s.E), 0);
  s.ll_pos.assign(size_t(s.ll_max * s.K), 0);
  if (s.fp8) {
    s.ll_quant.resize(size_t(s.ll_max * s.H));
    s.ll_quant_scales.resize(size_t(s.ll_max * s.scale_cols));
  }
}

Buffer::~Buffer() = default;

}  // namespace sol::ep
