#pragma once
// sol::ep — expert-parallel dispatch and combine with DeepEP's semantics, on Sol's comm layer.
//
// A Buffer is bound to a comm Group whose ranks each hold num_experts / size() experts (rank r
// holds experts [r·L, (r+1)·L), L = local experts). Its capacities are fixed at construction and
// all its memory is taken then, from the symmetric heap of the group's node (one-sided puts into
// peers' segments, then a flag), so no call allocates.
//
// Normal mode (training, prefill):
//   get_dispatch_layout(topk_idx) → tokens per rank, per node, per expert, is_token_in_rank.
//   dispatch(x, [x_scales], topk_idx, topk_weights, layout, handle): every token travels once to
//     every rank that holds at least one of its experts; received tokens are ordered by source
//     rank, then by token index. recv_topk_idx holds local expert ids (−1 for experts elsewhere,
//     with weight 0); −1 in topk_idx drops that choice. num_recv_tokens_per_expert is padded up
//     to expert_alignment. Payload bf16, or f8e4m3 with f32 scales per 1×128 block.
//   combine(y, handle, out): out[t] = Σ over the ranks token t went to of y at its received row,
//     summed in f32 and rounded once to bf16 (unweighted, as DeepEP's normal combine; tokens
//     sent nowhere get zeros). A handle may be reused for a cached dispatch of new payloads.
//     On one node y may be combine_buffer()'s view, and then no row is copied at all.
//   Groups that span nodes (SOL_LOCAL_SIZE; every node the same number of ranks G) are
//   hierarchical, as DeepEP's internode kernels: a token crosses to each destination NODE once,
//   to the rank with the source's local index, which forwards it to its destination ranks inside
//   that node; combine reduces inside each node first and crosses back once (a remote node's
//   partial sum is rounded to bf16 before it crosses, as DeepEP does, so for values whose sums
//   are not exact in bf16 the result may differ from one node's in the last bit). Nodes of unequal size fall back to the group's
//   all_to_all_v (one cross-node transfer per destination rank); last_dispatch_traffic() says
//   what crossed.
//
// Low-latency mode (decode): low_latency_dispatch(x, topk_idx) → recv_x
//   [local_experts, size()·max_tokens, hidden] with recv_count [local_experts] valid rows per
//   expert (ordered by source rank, then token): the masked layout grouped_gemm_masked reads
//   directly. One copy per (token, expert) straight into the expert's packed rows.
//   low_latency_combine(y, topk_idx, topk_weights, handle, out): out[t] = Σ_j w[t,j]·y(t,j) in f32.
//   Two alternating receive buffers: the result of dispatch i stays valid while dispatch i+1
//   is in flight (until dispatch i+2 is called). With async, the call only sends; wait() on the
//   handle receives (so compute of micro-batch i overlaps the transfer of i+1). The previous
//   dispatch must have been waited before the next one is started. Single node only.
//
// Views returned by dispatch calls point into the Buffer and stay valid until the next call of
// the same kind (normal dispatch; low-latency dispatch two calls later). Every wait is bounded
// by SOL_COMM_TIMEOUT_S and throws sol::CommError naming the peer.
#include <cstdint>
#include <memory>
#include <vector>

#include "sol/comm.h"
#include "sol/tensor.h"

namespace sol::ep {

class Buffer;

struct BufferConfig {
  int64_t hidden = 7168;
  int64_t num_experts = 256;
  int64_t top_k = 8;
  DType dtype = DType::bf16;             // dispatch payload: bf16 or f8e4m3 (+ 1×128 f32 scales)
  int64_t max_tokens_per_rank = 4096;    // normal mode; 0: no normal-mode memory
  int64_t low_latency_max_tokens = 0;    // low-latency mode, per rank per call; 0: none
};

// Views (normal mode): written by Buffer::get_dispatch_layout, read by dispatch.
struct DispatchLayout {
  Tensor num_tokens_per_rank;    // i32 [ranks]
  Tensor num_tokens_per_node;    // i32 [nodes]
  Tensor num_tokens_per_expert;  // i32 [experts]
  Tensor is_token_in_rank;       // u8 [tokens, ranks], 0 or 1
};

// What combine and a cached dispatch need from a dispatch. Reuses its storage between calls.
// What one call of this rank moved across nodes (zero on one node). Bytes are those handed to
// the cross-node transport: per token, the payload row, its scales and (first dispatch only)
// its top_k expert ids and weights; combine: one bf16 row per token.
struct Traffic {
  int64_t cross_node_tokens_sent = 0, cross_node_bytes_sent = 0;
  int64_t cross_node_tokens_received = 0, cross_node_bytes_received = 0;
};

class DispatchHandle {
 public:
  int64_t num_tokens() const { return tokens_; }
  int64_t num_recv_tokens() const { return recv_tokens_; }

 private:
  friend class Buffer;
  const void* owner_ = nullptr;
  int64_t tokens_ = 0, recv_tokens_ = 0;
  std::vector<int64_t> counts_;   // [src][dst] tokens sent from src to dst
  std::vector<int32_t> send_pos_; // [token][dst]: row within the block to dst, or -1
  std::vector<int32_t> recv_per_expert_;  // padded, [local_experts]
  // Hierarchical path only. A "stream" is one source rank's tokens to one node, in token order.
  std::vector<int64_t> node_counts_;  // [src][node] tokens of src with a destination on node
  std::vector<int32_t> stream_pos_;   // [token][node]: row within this rank's stream to node, or -1
  std::vector<int32_t> own_stream_;   // tokens of this rank's stream to its own node
  std::vector<int32_t> forward_pos_;  // [row of the streams this rank forwards][local rank]: row
                                      // within (source -> that rank)'s block, or -1
};

struct DispatchResult {
  Tensor recv_x;                      // [N, hidden] buffer dtype
  Tensor recv_x_scales;               // [N, hidden/128] f32 (fp8 only)
  Tensor recv_topk_idx;               // [N, top_k] i32: local expert or −1 (not for cached)
  Tensor recv_topk_weights;           // [N, top_k] f32 (not for cached)
  Tensor num_recv_tokens_per_expert;  // i32 [local_experts], padded to expert_alignment
};

class LowLatencyHandle {
 public:
  LowLatencyHandle() = default;
  // Receives: returns once every peer's tokens are in place (bounded by the comm timeout).
  void wait();
  bool pending() const { return pending_; }

 private:
  friend class Buffer;
  Buffer* buffer_ = nullptr;
  uint64_t seq_ = 0;
  int64_t tokens_ = 0;
  bool pending_ = false;
};

struct LowLatencyResult {
  Tensor recv_x;         // [local_experts, ranks·max_tokens, hidden] buffer dtype
  Tensor recv_x_scales;  // [local_experts, ranks·max_tokens, hidden/128] f32 (fp8 only)
  Tensor recv_count;     // i32 [local_experts] (valid after wait)
};

class Buffer {
 public:
  // Collective over the group: every rank passes the same configuration.
  Buffer(const comm::Group& group, const BufferConfig& config);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  const BufferConfig& config() const { return config_; }
  int rank() const { return group_.rank(); }
  int num_ranks() const { return group_.size(); }
  int64_t num_local_experts() const { return local_experts_; }
  // Cross-node traffic of this rank's last normal dispatch (cached or not) and last combine.
  const Traffic& last_dispatch_traffic() const;
  const Traffic& last_combine_traffic() const;

  // Normal mode. topk_idx: i32 [T, top_k]; the views stay valid until the next call.
  const DispatchLayout& get_dispatch_layout(const Tensor& topk_idx);
  // x: [T, hidden] of the buffer's dtype; x_scales [T, hidden/128] f32 for fp8 (else null);
  // topk_weights f32 [T, top_k]. Collective.
  DispatchResult dispatch(const Tensor& x, const Tensor* x_scales, const Tensor& topk_idx,
                          const Tensor& topk_weights, const DispatchLayout& layout,
                          DispatchHandle& handle, int64_t expert_alignment = 1);
  // Cached: the routing of `handle`, new payload (recv_topk_* are left empty).
  DispatchResult dispatch(const Tensor& x, const Tensor* x_scales, const DispatchHandle& handle);
  // y: bf16 [handle.num_recv_tokens(), hidden]; out: bf16 [handle.num_tokens(), hidden].
  void combine(const Tensor& y, const DispatchHandle& handle, const Tensor& out);
  // In-place combine (one node): a bf16 [handle.num_recv_tokens(), hidden] view of this rank's
  // combine region in shared memory. Write y there (e.g. as the down-projection's output) and
  // pass the view itself as y: sources then read the rows where they lie, nothing is copied.
  // Every rank of one combine call must do the same. Writable from when the previous combine
  // returned until this one is called.
  Tensor combine_buffer(const DispatchHandle& handle);

  // Low-latency mode. x: bf16 [T ≤ low_latency_max_tokens, hidden] (cast to fp8 with 1×128
  // scales in flight when the buffer's dtype is f8e4m3); topk_idx i32 [T, top_k].
  LowLatencyResult low_latency_dispatch(const Tensor& x, const Tensor& topk_idx,
                                        LowLatencyHandle& handle, bool async = false);
  // y: bf16 [local_experts, ranks·max_tokens, hidden] in the layout the dispatch of `handle`
  // produced; out bf16 [T, hidden]: Σ_j topk_weights[t,j] · y(t, j) in f32.
  void low_latency_combine(const Tensor& y, const Tensor& topk_idx, const Tensor& topk_weights,
                           const LowLatencyHandle& handle, const Tensor& out);

  struct State;

 private:
  friend class LowLatencyHandle;
  void low_latency_receive(LowLatencyHandle& handle);
  DispatchResult dispatch_impl(const Tensor& x, const Tensor* x_scales, const Tensor* topk_idx,
                               const Tensor* topk_weights, DispatchHandle& handle, bool cached,
                               int64_t expert_alignment);
  DispatchResult finish_dispatch(DispatchHandle& handle, bool cached, int64_t recv_total, int64_t expert_alignment);
  void dispatch_hierarchical(const Tensor& x, const Tensor* x_scales, const Tensor* topk_idx,
                             const Tensor* topk_weights, DispatchHandle& handle, bool cached);
  void combine_hierarchical(const Tensor& y, const DispatchHandle& handle, const Tensor& out);

  comm::Group group_;
  BufferConfig config_;
  int64_t local_experts_ = 0;
  std::unique_ptr<State> state_;
};

}  // namespace sol::ep
