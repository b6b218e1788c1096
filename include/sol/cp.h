#pragma once
// sol::cp — context parallelism: attention over a group whose ranks each hold a slice of the
// sequence. Three algorithms behind one call, picked with RingAttentionOptions::variant
// (by topology and shape; all take and return the same zig-zag shards):
//
// Zig-zag sharding (causal load balance): the sequence of S tokens is cut into 2n chunks of
// C = S / 2n tokens; rank r holds chunks r and 2n-1-r, concatenated ([B, 2C, H, D]). Every rank
// then has the same amount of unmasked causal work.
//
// Variant::ring (default): n steps; at step i a rank holds the K/V shard of rank (r - i) mod n,
// sends it on to rank r+1 and receives the next from rank r-1 (batched async send/recv,
// progressed between the block computations and completed after them), and runs flash
// attention of its query chunks against the key chunks they may see: one block per step (two
// at step 0), cut into about three pieces of query rows so that the transfer is polled while
// the rank computes (src/cp/ring_plan.h). Partial outputs are merged in f32 by
// log-sum-exp:  lse = log(exp(lse_a) + exp(lse_b)),  o = o_a exp(lse_a - lse) + o_b exp(lse_b - lse).
// Backward: the same ring; dq stays home, an f32 dk/dv accumulator travels with each K/V shard
// and comes back to its owner after n steps. Each rank sends n-1 K/V shards (forward and
// backward) and, backward, n f32 dk/dv accumulators; only neighbours talk. Within one node,
// with RingAttentionOptions::kv_window, the same steps read every rank's shard in place from a
// shared window instead (nothing travels; the backward returns dk/dv by one reduce_scatter).
//
// Variant::all_gather_kv: one all_gather of every rank's K/V, then each query chunk attends to
// the keys before it (causal) or all keys in one call; no merge. Backward: dk/dv of the whole
// sequence summed in f32 with one reduce_scatter back to the owners. Fewer, larger messages
// (good for GQA/MQA, where K/V is small), K/V of the whole sequence in memory, and the
// transfer is not overlapped with compute.
//
// Variant::ulysses (DeepSpeed-Ulysses): all_to_all turns sequence shards into head shards
// (every rank gets the whole sequence for H/n query heads and Hkv/n key/value heads), one
// single-rank flash attention, and all_to_all back. Needs H divisible by n, and Hkv either
// divisible by n or dividing n (GQA/MQA with fewer K/V heads than ranks: each K/V head is sent
// to the n / Hkv ranks whose query heads use it, and their dk/dv shares are summed in f32).
// Moves q, k, v, o (backward also dO, dq, dk, dv) once each, with (n-1)/n of them crossing.
//
// Every rank passes the same shapes, options and variant (collective over `group`).
#include <optional>
#include <string>

#include "sol/comm.h"
#include "sol/comm_window.h"
#include "sol/tensor.h"

namespace sol::cp {

enum class Variant { ring, all_gather_kv, ulysses };
const char* variant_name(Variant v);  // "ring" | "all_gather_kv" | "ulysses"
Variant parse_variant(const std::string& name);  // throws sol::Error

// Where one call's wall time went on this rank (added to, so a caller can sum several calls).
struct RingAttentionStats {
  double compute_s = 0;  // single-rank attention kernels, LSE merges, gradient sums
  double comm_s = 0;     // posting, polling and waiting for transfers, collectives, packing
  // Ring: K/V shards received (steps with a shard in flight), and how many of them had wholly
  // arrived when this rank finished the step's compute, i.e. were hidden behind it entirely.
  // Time slices lost to other processes move it far less than they move times.
  int shards = 0, shards_arrived = 0;
};

struct RingAttentionOptions {
  bool causal = true;
  std::optional<float> softmax_scale;  // default 1/sqrt(D)
  Variant variant = Variant::ring;
  RingAttentionStats* stats = nullptr;  // when set, this call's time split is added to it
  // Variant::ring within one node: a comm::Window over the same group whose every region holds
  // at least this rank's packed K/V shard (k's bytes then v's). The ring then reads each rank's
  // shard in place instead of passing it around (nothing is transferred: a window fence after
  // publishing the shards, one at the end), and the backward returns dk/dv with one f32
  // reduce_scatter instead of passing accumulators. Build it once, reuse it for every call.
  const comm::Window* kv_window = nullptr;
};

// q [B, 2C, Hq, D], k [B, 2C, Hkv, D], v [B, 2C, Hkv, Dv] (this rank's zig-zag shard, f32 or
// bf16, contiguous); o [B, 2C, Hq, Dv] of q's dtype; lse f32 [B, Hq, 2C], or Tensor() (or any empty tensor) when not wanted.
// Collective over `group`; every rank passes the same shapes.
void ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                    const comm::Group& group, const RingAttentionOptions& options = {});

// Gradients of ring_attention: o and lse (required) are its outputs for the same shards and
// options; d_o is shaped like o, dq, dk, dv like q, k, v (this rank's shards, contiguous, of
// q's dtype). Any variant may differentiate any variant's forward (they agree within
// rounding). dk and dv sum over the q heads of each group (GQA) and over all ranks' queries.
void ring_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
                             const Tensor& d_o, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                             const comm::Group& group, const RingAttentionOptions& options = {});

// shard = rank's zig-zag shard of full ([B, S, ...] with S divisible by 2 x ranks); and back.
void zigzag_shard(const Tensor& full, const Tensor& shard, int rank, int ranks);
void zigzag_unshard(const Tensor& shard, const Tensor& full, int rank, int ranks);

}  // namespace sol::cp
