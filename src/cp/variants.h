#pragma once
// The context-parallel attention algorithms behind cp::ring_attention and its backward (the
// public functions validate and dispatch on RingAttentionOptions::variant).
#include "cp/ring_plan.h"
#include "cp/shard_layout.h"
#include "sol/comm.h"

namespace sol::cp::detail {

struct Forward {
  const Tensor &q, &k, &v, &o, &lse;  // lse may be empty (dims.has_lse)
};
struct Backward {
  const Tensor &q, &k, &v, &o, &lse, &d_o, &dq, &dk, &dv;
};

// o_acc [B, S2, H, Dv], lse_acc [B, H, S2] (f32) merged by log-sum-exp with one partial result
// for query rows [row0, row0 + rows): o_part [B, rows, H, Dv], lse_part [B, H, rows].
void merge_partial(float* o_acc, float* lse_acc, const Tensor& o_part, const float* lse_part, const ShardDims& d,
                   int64_t row0);

// The gradient parts of one ring block: flash_attention_backward of the block's query rows
// [q0, q1) against its keys [k0, k1) of k and v (this rank's shard, or a peer's), written to the
// first rows of dq_part, dk_part and dv_part, whose row views it returns.
struct BlockGrads {
  Tensor dq, dk, dv;
};
BlockGrads block_backward(const Backward& t, const ShardDims& d, const Tensor& k, const Tensor& v,
                          const RingBlock& blk, const RingAttentionOptions& opt, const Buffer& dq_part,
                          const Buffer& dk_part, const Buffer& dv_part);

void ring_forward(const Forward& t, const ShardDims& dims, const comm::Group& group, const RingAttentionOptions& opt);
void ring_backward(const Backward& t, const ShardDims& dims, const comm::Group& group, const RingAttentionOptions& opt);
// Variant::ring with opt.kv_window: every rank's K/V shard read in place (ring_in_place.cc).
void ring_forward_in_place(const Forward& t, const ShardDims& dims, const comm::Group& group,
                           const RingAttentionOptions& opt);
void ring_backward_in_place(const Backward& t, const ShardDims& dims, const comm::Group& group,
                            const RingAttentionOptions& opt);
void all_gather_forward(const Forward& t, const ShardDims& dims, const comm::Group& group,
                        const RingAttentionOptions& opt);
void all_gather_backward(const Backward& t, const ShardDims& dims, const comm::Group& group,
                         const RingAttentionOptions& opt);
void ulysses_forward(const Forward& t, const ShardDims& dims, const comm::Group& group, const RingAttentionOptions& opt);
void ulysses_backward(const Backward& t, const ShardDims& dims, const comm::Group& group,
                      const RingAttentionOptions& opt);

}  // namespace sol::cp::detail
