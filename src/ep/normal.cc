// Normal mode (training, prefill): layout, dispatch and cached dispatch.
//
// Dispatch n, on one node (two flag rounds):
//   1. Each rank computes where its tokens go (send_pos[t][d]: the token's row within its block
//      to rank d), publishes its count row [R] and per-expert counts [E] in its own segment
//      (slot n % 2) and raises normal_posted = n. Raising it also says "my views of dispatch
//      n−1 are released", so after seeing every peer's flag a rank may write into them.
//   2. With every count row, each rank knows where its block starts in every receiver
//      (sources in rank order), writes each token's row, scales, local expert ids and weights
//      straight into the receivers' regions (one copy per token per destination rank), raises
//      normal_sent = n and waits for every peer's.
// A metadata slot is rewritten two calls later, after every peer raised normal_sent of the call
// in between, i.e. after it finished reading the slot.
//
// Combine: combine.cc (one node, nodes of unequal size), hierarchical.cc (across nodes).
//
// Groups across nodes of equal size are hierarchical (hierarchical.cc). Nodes of unequal size
// use the same regions in private memory and move them with the group's all_to_all_v.
#include <algorithm>
#include <cstring>
#include <string>

#include "comm/group_state.h"
#include "comm/move_bytes.h"
#include "comm/reduce.h"
#include "comm/wait.h"
#include "ep/buffer_state.h"
#include "hw/kernel_select.h"
#include "kernels/move_bytes.h"
#include "core/parallel.h"
#include "hw/streaming.h"
#include "sol/error.h"

namespace sol::ep {

namespace {

void require_matrix(const char* op, const char* arg, const Tensor& t, DType dtype, int64_t rows, int64_t cols) {
  if (t.ndim() != 2 || t.dtype() != dtype || !t.is_contiguous() || (rows >= 0 && t.shape(0) != rows) ||
      t.shape(1) != cols)
    fail(op, arg, " must be a contiguous ", dtype_name(dtype), " [", rows >= 0 ? std::to_string(rows) : "T",
         ", ", cols, "] tensor, got ", describe_text(t));
}

void require_vector(const char* op, const char* arg, const Tensor& t, DType dtype, int64_t n) {
  if (t.ndim() != 1 || t.dtype() != dtype || !t.is_contiguous() || t.shape(0) != n)
    fail(op, arg, " must be a contiguous ", dtype_name(dtype), " [", n, "] tensor, got ", describe_text(t));
}

}  // namespace

const DispatchLayout& Buffer::get_dispatch_layout(const Tensor& topk_idx) {
  const char* op = "ep::get_dispatch_layout";
  State& s = *state_;
  check(s.max_tokens > 0, op, "the buffer was built without normal mode (max_tokens_per_rank = 0)");
  require_matrix(op, "topk_idx", topk_idx, DType::i32, -1, s.K);
  const int64_t T = topk_idx.shape(0);
  check(T <= s.max_tokens, op, "topk_idx has ", T, " tokens but the buffer holds max_tokens_per_rank = ",
        s.max_tokens);
  const int R = s.R;
  const std::vector<int>& node_of = s.node_of;
  std::fill(s.tokens_per_rank.begin(), s.tokens_per_rank.end(), 0);
  std::fill(s.tokens_per_node.begin(), s.tokens_per_node.end(), 0);
  std::fill(s.tokens_per_expert.begin(), s.tokens_per_expert.end(), 0);
  const int32_t* idx = topk_idx.data_as<const int32_t>();
  std::vector<uint8_t> node_hit(s.tokens_per_node.size());
  for (int64_t t = 0; t < T; ++t) {
    uint8_t* in = s.in_rank.data() + t * R;
    std::memset(in, 0, size_t(R));
    for (int64_t j = 0; j < s.K; ++j) {
      const int32_t e = idx[t * s.K + j];
      if (e == -1) continue;
      if (e < 0 || e >= s.E) fail(op, "topk_idx[", t, ", ", j, "] = ", e, " is outside [0, ", s.E, ") and not -1");
      ++s.tokens_per_expert[size_t(e)];
      in[e / s.L] = 1;
    }
    std::fill(node_hit.begin(), node_hit.end(), 0);
    for (int d = 0; d < R; ++d)
      if (in[d]) {
        ++s.tokens_per_rank[size_t(d)];
        node_hit[size_t(node_of[size_t(d)])] = 1;
      }
    for (size_t n = 0; n < node_hit.size(); ++n) s.tokens_per_node[n] += node_hit[n];
  }
  s.layout.num_tokens_per_rank = Tensor(s.tokens_per_rank.data(), DType::i32, {int64_t(R)});
  s.layout.num_tokens_per_node = Tensor(s.tokens_per_node.data(), DType::i32, {int64_t(s.tokens_per_node.size())});
  s.layout.num_tokens_per_expert = Tensor(s.tokens_per_expert.data(), DType::i32, {s.E});
  s.layout.is_token_in_rank = Tensor(s.in_rank.data(), DType::u8, {T, int64_t(R)});
  return s.layout;
}

DispatchResult Buffer::dispatch(const Tensor& x, const Tensor* x_scales, const Tensor& topk_idx,
                                const Tensor& topk_weights, const DispatchLayout& layout,
                                DispatchHandle& handle, int64_t expert_alignment) {
  const char* op = "ep::dispatch";
  State& s = *state_;
  check(s.max_tokens > 0, op, "the buffer was built without normal mode (max_tokens_per_rank = 0)");
  check(expert_alignment >= 1, op, "expert_alignment = ", expert_alignment, " but must be >= 1");
  require_matrix(op, "topk_idx", topk_idx, DType::i32, -1, s.K);
  const int64_t T = topk_idx.shape(0);
  check(T <= s.max_tokens, op, "topk_idx has ", T, " tokens but the buffer holds max_tokens_per_rank = ",
        s.max_tokens);
  require_matrix(op, "topk_weights", topk_weights, DType::f32, T, s.K);
  require_vector(op, "layout.num_tokens_per_rank", layout.num_tokens_per_rank, DType::i32, s.R);
  require_vector(op, "layout.num_tokens_per_expert", layout.num_tokens_per_expert, DType::i32, s.E);
  require_matrix(op, "layout.is_token_in_rank", layout.is_token_in_rank, DType::u8, T, s.R);

  // Where each token goes, from topk_idx; the layout must agree (a stale layout would send
  // rows to the wrong places).
  const int R = s.R;
  const int32_t* idx = topk_idx.data_as<const int32_t>();
  const uint8_t* in_rank = layout.is_token_in_rank.data_as<const uint8_t>();
  handle.owner_ = this;
  handle.tokens_ = T;
  handle.send_pos_.resize(size_t(T) * size_t(R));
  std::fill(s.scratch_counts.begin(), s.scratch_counts.end(), 0);
  std::fill(s.expert_scratch.begin(), s.expert_scratch.end(), 0);
  for (int64_t t = 0; t < T; ++t) {
    int32_t* pos = handle.send_pos_.data() + t * R;
    std::fill(pos, pos + R, -1);
    for (int64_t j = 0; j < s.K; ++j) {
      const int32_t e = idx[t * s.K + j];
      if (e == -1) continue;
      if (e < 0 || e >= s.E) fail(op, "topk_idx[", t, ", ", j, "] = ", e, " is outside [0, ", s.E, ") and not -1");
      ++s.expert_scratch[size_t(e)];
      const int64_t d = e / s.L;
      if (pos[d] < 0) pos[d] = s.scratch_counts[size_t(d)]++;
    }
    for (int d = 0; d < R; ++d)
      if ((pos[d] >= 0) != (in_rank[t * R + d] != 0))
        fail(op, "layout.is_token_in_rank[", t, ", ", d, "] = ", int(in_rank[t * R + d]),
             " disagrees with topk_idx (pass the layout of this topk_idx)");
  }
  const int32_t* per_rank = layout.num_tokens_per_rank.data_as<const int32_t>();
  const int32_t* per_expert = layout.num_tokens_per_expert.data_as<const int32_t>();
  for (int d = 0; d < R; ++d)
    check(per_rank[d] == s.scratch_counts[size_t(d)], op, "layout.num_tokens_per_rank[", d, "] = ", per_rank[d],
          " but topk_idx sends ", s.scratch_counts[size_t(d)], " tokens there");
  for (int64_t e = 0; e < s.E; ++e)
    check(per_expert[e] == s.expert_scratch[size_t(e)], op, "layout.num_tokens_per_expert[", e, "] = ",
          per_expert[e], " but topk_idx routes ", s.expert_scratch[size_t(e)], " tokens there");
  return dispatch_impl(x, x_scales, &topk_idx, &topk_weights, handle, false, expert_alignment);
}

DispatchResult Buffer::dispatch(const Tensor& x, const Tensor* x_scales, const DispatchHandle& handle) {
  const char* op = "ep::dispatch (cached)";
  check(handle.owner_ == this, op, "the handle does not come from a dispatch on this buffer");
  State& s = *state_;
  // The cached path publishes the handle's own counts; peers compare them with theirs.
  std::fill(s.scratch_counts.begin(), s.scratch_counts.end(), 0);
  for (int d = 0; d < s.R; ++d) s.scratch_counts[size_t(d)] = int32_t(handle.counts_[size_t(s.me * s.R + d)]);
  std::fill(s.expert_scratch.begin(), s.expert_scratch.end(), 0);
  return dispatch_impl(x, x_scales, nullptr, nullptr, const_cast<DispatchHandle&>(handle), true, 1);
}

DispatchResult Buffer::dispatch_impl(const Tensor& x, const Tensor* x_scales, const Tensor* topk_idx,
                                     const Tensor* topk_weights, DispatchHandle& handle, bool cached,
                                     int64_t expert_alignment) {
  const char* op = cached ? "ep::dispatch (cached)" : "ep::dispatch";
  State& s = *state_;
  const int R = s.R, me = s.me;
  const int64_t T = handle.tokens_;
  require_matrix(op, "x", x, config_.dtype, T, s.H);
  if (s.fp8) {
    check(x_scales != nullptr, op, "x is f8e4m3 but x_scales is null (expected f32 [T, hidden/128])");
    require_matrix(op, "x_scales", *x_scales, DType::f32, T, s.scale_cols);
  } else {
    check(x_scales == nullptr, op, "x_scales given but the buffer's payload is bf16");
  }

  if (s.path == Path::hierarchical) {
    dispatch_hierarchical(x, x_scales, topk_idx, topk_weights, handle, cached);
    return finish_dispatch(handle, cached, s.recv_offset[size_t(R)], expert_alignment);
  }

  // ---- step 1: publish counts, see everyone's ----
  const uint64_t n = ++s.normal_seq;
  const int par = int(n & 1);
  int32_t* meta = reinterpret_cast<int32_t*>(s.own(s.off_meta[par]));
  std::copy(s.scratch_counts.begin(), s.scratch_counts.end(), meta);
  std::copy(s.expert_scratch.begin(), s.expert_scratch.end(), meta + R);
  std::vector<int64_t>& C = s.count_matrix;
  if (s.shared) {
    s.flags().normal_posted.value.store(n, std::memory_order_release);
    for (int p = 0; p < R; ++p) {
      if (p != me) s.wait_flag(p, s.flags_of(p).normal_posted, n, op, "dispatch call (counts posted)");
      const int32_t* theirs = reinterpret_cast<const int32_t*>(s.peer(p, s.off_meta[par]));
      for (int d = 0; d < R; ++d) C[size_t(p * R + d)] = theirs[d];
      if (!cached) continue;
      for (int d = 0; d < R; ++d)
        if (C[size_t(p * R + d)] != handle.counts_[size_t(p * R + d)])
          comm::detail::comm_failure(std::string(op) + ": ranks disagree on the cached handle: rank " +
                                     std::to_string(p) + " sends " + std::to_string(C[size_t(p * R + d)]) +
                                     " tokens to rank " + std::to_string(d) + " but this rank's handle says " +
                                     std::to_string(handle.counts_[size_t(p * R + d)]));
    }
    std::fill(s.recv_per_expert.begin(), s.recv_per_expert.end(), 0);
    if (!cached)
      for (int p = 0; p < R; ++p) {
        const int32_t* theirs = reinterpret_cast<const int32_t*>(s.peer(p, s.off_meta[par])) + R + me * s.L;
        for (int64_t e = 0; e < s.L; ++e) s.recv_per_expert[size_t(e)] += theirs[e];
      }
  } else {
    // Across nodes: the count rows travel by all_gather (per-expert counts are taken from the
    // received ids below).
    std::vector<int32_t> rows(size_t(R) * size_t(R));
    s.group.all_gather(Tensor(meta, DType::i32, {int64_t(R)}), Tensor(rows.data(), DType::i32, {int64_t(R) * R}));
    for (size_t i = 0; i < rows.size(); ++i) {
      if (cached && rows[i] != handle.counts_[i])
        throw CommError(std::string(op) + ": ranks disagree on the cached handle (count " + std::to_string(i) +
                        ": " + std::to_string(rows[i]) + " vs " + std::to_string(handle.counts_[i]) + ")");
      C[i] = rows[i];
    }
  }
  // Receivers' offsets: source p's block at rank d starts after the blocks of sources < p.
  std::vector<int64_t> dst_row(size_t(R), 0);  // where this rank's block starts at each d
  for (int d = 0; d < R; ++d)
    for (int p = 0; p < me; ++p) dst_row[size_t(d)] += C[size_t(p * R + d)];
  int64_t recv_total = 0;
  for (int p = 0; p < R; ++p) {
    s.recv_offset[size_t(p)] = recv_total;
    recv_total += C[size_t(p * R + me)];
  }
  s.recv_offset[size_t(R)] = recv_total;

  // ---- step 2: the rows ----
  const int32_t* idx = topk_idx ? topk_idx->data_as<const int32_t>() : nullptr;
  const float* w = topk_weights ? topk_weights->data_as<const float>() : nullptr;
  const int64_t K = s.K, L = s.L, sc = s.scale_cols, rb = s.row_bytes;
  const std::byte* xs = static_cast<const std::byte*>(x.data());
  const float* scales = s.fp8 ? x_scales->data_as<const float>() : nullptr;
  const int32_t* send_pos = handle.send_pos_.data();
  const kernels::MoveKernels& mk = select_kernels(kernels::move_kernel_table(), "ep");
  int64_t sent_rows = 0;
  for (int d = 0; d < R; ++d) sent_rows += C[size_t(me * R + d)];
  const bool stream = should_stream(sent_rows * rb);
  if (s.shared) {
    const size_t ranks = static_cast<size_t>(R);
    std::vector<std::byte*> base_x(ranks), base_s(ranks), base_i(ranks), base_w(ranks);
    for (int d = 0; d < R; ++d) {
      base_x[size_t(d)] = s.peer(d, s.off_recv_x) + dst_row[size_t(d)] * rb;
      base_s[size_t(d)] = s.peer(d, s.off_recv_scales) + dst_row[size_t(d)] * sc * 4;
      base_i[size_t(d)] = s.peer(d, s.off_recv_idx) + dst_row[size_t(d)] * K * 4;
      base_w[size_t(d)] = s.peer(d, s.off_recv_w) + dst_row[size_t(d)] * K * 4;
    }
    parallel_ranges(T, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t)
        for (int d = 0; d < R; ++d) {
          const int64_t pos = send_pos[t * R + d];
          if (pos < 0) continue;
          mk.copy(base_x[size_t(d)] + pos * rb, xs + t * rb, rb, stream, /*fence=*/true);
          if (sc) std::memcpy(base_s[size_t(d)] + pos * sc * 4, scales + t * sc, size_t(sc) * 4);
          if (cached) continue;
          int32_t* ri = reinterpret_cast<int32_t*>(base_i[size_t(d)]) + pos * K;
          float* rw = reinterpret_cast<float*>(base_w[size_t(d)]) + pos * K;
          for (int64_t j = 0; j < K; ++j) {
            const int32_t e = idx[t * K + j];
            const bool local = e >= 0 && e / L == d;
            ri[j] = local ? int32_t(e - d * L) : -1;
            rw[j] = local ? w[t * K + j] : 0.0f;
          }
        }
    });
    s.flags().normal_sent.value.store(n, std::memory_order_release);
    for (int p = 0; p < R; ++p)
      if (p != me) s.wait_flag(p, s.flags_of(p).normal_sent, n, op, "dispatch call (rows written)");
    s.dispatch_traffic = {};
  } else {
    // Pack by destination, then one all_to_all_v per array straight into the receive regions.
    std::vector<int64_t> send_start(size_t(R) + 1, 0);
    for (int d = 0; d < R; ++d) send_start[size_t(d) + 1] = send_start[size_t(d)] + C[size_t(me * R + d)];
    std::byte* px = s.own(s.off_send_x);
    float* ps = reinterpret_cast<float*>(s.own(s.off_send_scales));
    int32_t* pi = reinterpret_cast<int32_t*>(s.own(s.off_send_idx));
    float* pw = reinterpret_cast<float*>(s.own(s.off_send_w));
    for (int64_t t = 0; t < T; ++t)
      for (int d = 0; d < R; ++d) {
        const int64_t pos = send_pos[t * R + d];
        if (pos < 0) continue;
        const int64_t r = send_start[size_t(d)] + pos;
        mk.copy(px + r * rb, xs + t * rb, rb, false, /*fence=*/true);
        if (sc) std::memcpy(ps + r * sc, scales + t * sc, size_t(sc) * 4);
        if (cached) continue;
        for (int64_t j = 0; j < K; ++j) {
          const int32_t e = idx[t * K + j];
          const bool local = e >= 0 && e / L == d;
          pi[r * K + j] = local ? int32_t(e - d * L) : -1;
          pw[r * K + j] = local ? w[t * K + j] : 0.0f;
        }
      }
    std::vector<int64_t> send(static_cast<size_t>(R)), recv(static_cast<size_t>(R));
    auto exchange = [&](size_t send_off, size_t recv_off, DType t, int64_t per_row) {
      for (int p = 0; p < R; ++p) {
        send[size_t(p)] = C[size_t(me * R + p)] * per_row;
        recv[size_t(p)] = C[size_t(p * R + me)] * per_row;
      }
      s.group.all_to_all_v(Tensor(s.own(send_off), t, {std::max<int64_t>(sent_rows * per_row, 0)}), send,
                           Tensor(s.own(recv_off), t, {recv_total * per_row}), recv);
    };
    // What crossed nodes: every block to (from) a rank on another node, once per rank.
    Traffic& traffic = s.dispatch_traffic;
    traffic = {};
    for (int p = 0; p < R; ++p)
      if (s.node_of[size_t(p)] != s.my_node) {
        traffic.cross_node_tokens_sent += C[size_t(me * R + p)];
        traffic.cross_node_tokens_received += C[size_t(p * R + me)];
      }
    const int64_t rec = rb + sc * 4 + (cached ? 0 : 8 * K);
    traffic.cross_node_bytes_sent = traffic.cross_node_tokens_sent * rec;
    traffic.cross_node_bytes_received = traffic.cross_node_tokens_received * rec;
    exchange(s.off_send_x, s.off_recv_x, DType::i8, rb);
    if (sc) exchange(s.off_send_scales, s.off_recv_scales, DType::f32, sc);
    if (!cached) {
      exchange(s.off_send_idx, s.off_recv_idx, DType::i32, K);
      exchange(s.off_send_w, s.off_recv_w, DType::f32, K);
      std::fill(s.recv_per_expert.begin(), s.recv_per_expert.end(), 0);
      const int32_t* ri = reinterpret_cast<const int32_t*>(s.own(s.off_recv_idx));
      for (int64_t i = 0; i < recv_total * K; ++i)
        if (ri[i] >= 0) ++s.recv_per_expert[size_t(ri[i])];
    }
  }

  return finish_dispatch(handle, cached, recv_total, expert_alignment);
}

DispatchResult Buffer::finish_dispatch(DispatchHandle& handle, bool cached, int64_t recv_total,
                                       int64_t expert_alignment) {
  State& s = *state_;
  const int64_t K = s.K, L = s.L;
  DispatchResult r;
  r.recv_x = Tensor(s.own(s.off_recv_x), config_.dtype, {recv_total, s.H});
  if (s.fp8) r.recv_x_scales = Tensor(s.own(s.off_recv_scales), DType::f32, {recv_total, s.scale_cols});
  if (!cached) {
    const std::vector<int64_t>& C = s.count_matrix;
    handle.counts_.assign(C.begin(), C.end());
    handle.recv_tokens_ = recv_total;
    handle.recv_per_expert_.resize(size_t(L));
    for (int64_t e = 0; e < L; ++e) {
      const int64_t c = s.recv_per_expert[size_t(e)];
      handle.recv_per_expert_[size_t(e)] = int32_t((c + expert_alignment - 1) / expert_alignment * expert_alignment);
    }
    r.recv_topk_idx = Tensor(s.own(s.off_recv_idx), DType::i32, {recv_total, K});
    r.recv_topk_weights = Tensor(s.own(s.off_recv_w), DType::f32, {recv_total, K});
  }
  r.num_recv_tokens_per_expert = Tensor(handle.recv_per_expert_.data(), DType::i32, {L});
  return r;
}

}  // namespace sol::ep
