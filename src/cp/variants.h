#pragma once
// The context-parallel attention algorithms behind cp::ring_attention and its backward (the
// public functions validate and dispatch on RingAttentionOptions::variant).
#include "cp/shard_layout.h"
#include "sol/comm.h"

namespace sol::cp::detail {

struct Forward {
  const Tensor &q, &k, &v, &o, &lse;  // lse may be empty (dims.has_lse)
};
struct Backward {
  const Tensor &q, &k, &v, &o, &lse, &d_o, &dq, &dk, &dv;
};

void ring_forward(const Forward& t, const ShardDims& dims, const comm::Group& group, const RingAttentionOptions& opt);
void ring_backward(const Backward& t, const ShardDims& dims, const comm::Group& group, const RingAttentionOptions& opt);
void all_gather_forward(const Forward& t, const ShardDims& dims, const comm::Group& group,
                        const RingAttentionOptions& opt);
void all_gather_backward(const Backward& t, const ShardDims& dims, const comm::Group& group,
                         const RingAttentionOptions& opt);
void ulysses_forward(const Forward& t, const ShardDims& dims, const comm::Group& group, const RingAttentionOptions& opt);
void ulysses_backward(const Backward& t, const ShardDims& dims, const comm::Group& group,
                      const RingAttentionOptions& opt);

}  // namespace sol::cp::detail
