#pragma once
// sol::cp — context parallelism: ring attention over a group whose ranks each hold a slice of
// the sequence.
//
// Zig-zag sharding (causal load balance): the sequence of S tokens is cut into 2n chunks of
// C = S / 2n tokens; rank r holds chunks r and 2n-1-r, concatenated ([B, 2C, H, D]). Every rank
// then has the same amount of unmasked causal work.
//
// ring_attention: n steps; at step i a rank holds the K/V shard of rank (r - i) mod n, sends it
// on to rank r+1 and receives the next from rank r-1 (batched async send/recv, progressed
// between the block computations and completed after them), and runs flash attention of each
// of its two query chunks against each of the two key chunks it may see (a chunk pair with
// the query chunk before the key chunk is skipped; equal chunks are causal; later ones full).
// The partial outputs are merged in f32 with their log-sum-exp:
//   lse = log(exp(lse_a) + exp(lse_b)),  o = o_a exp(lse_a - lse) + o_b exp(lse_b - lse).
// Forward only; the all-gather-KV and Ulysses variants and the backward are not implemented.
#include <optional>

#include "sol/comm.h"
#include "sol/tensor.h"

namespace sol::cp {

struct RingAttentionOptions {
  bool causal = true;
  std::optional<float> softmax_scale;  // default 1/sqrt(D)
};

// q [B, 2C, Hq, D], k [B, 2C, Hkv, D], v [B, 2C, Hkv, Dv] (this rank's zig-zag shard, f32 or
// bf16, contiguous); o [B, 2C, Hq, Dv] of q's dtype; lse f32 [B, Hq, 2C], or Tensor() (or any empty tensor) when not wanted.
// Collective over `group`; every rank passes the same shapes.
void ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                    const comm::Group& group, const RingAttentionOptions& options = {});

// shard = rank's zig-zag shard of full ([B, S, ...] with S divisible by 2 x ranks); and back.
void zigzag_shard(const Tensor& full, const Tensor& shard, int rank, int ranks);
void zigzag_unshard(const Tensor& shard, const Tensor& full, int rank, int ranks);

}  // namespace sol::cp
