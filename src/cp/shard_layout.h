#pragma once
// What every context-parallel attention variant shares: the zig-zag chunk numbering, the
// validation of a rank's shards, and f32 accumulation of partial results.
#include <cstdint>

#include "sol/attention.h"
#include "sol/cp.h"
#include "sol/tensor.h"
#include "sol/timing.h"

namespace sol::cp::detail {

// Global chunk index of a rank's local chunk 0 or 1 (of 2 x ranks chunks).
inline int64_t chunk_of(int local_chunk, int rank, int ranks) {
  return local_chunk == 0 ? rank : 2 * ranks - 1 - rank;
}

// The dimensions of one rank's shards, validated: q [B, 2C, H, D], k [B, 2C, Hkv, D],
// v [B, 2C, Hkv, Dv], o [B, 2C, H, Dv], lse f32 [B, H, 2C] (optional unless lse_required).
struct ShardDims {
  int64_t B = 0, S2 = 0, C = 0, H = 0, Hkv = 0, D = 0, Dv = 0;
  DType dtype = DType::f32;
  bool has_lse = false;
};
ShardDims check_shards(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                       const Tensor& lse, bool lse_required);
// The backward's extra tensors: d_o like o, dq like q, dk like k, dv like v (contiguous).
void check_grads(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                 const Tensor& d_o, const Tensor& dq, const Tensor& dk, const Tensor& dv);

// dst = src (same shape and dtype, not overlapping): one memcpy per run of trailing dims that
// is contiguous in both views (a single element when the last dim is strided). sol::copy walks other strided views element
// by element, which made the zig-zag and head reshuffles cost as much as the transfers.
void copy_rows(const Tensor& src, const Tensor& dst);

// The per-block options of the single-rank kernels.
AttentionOptions block_options(const RingAttentionOptions& opt, bool causal);

// acc (f32, contiguous [B, S_acc, H, D]) rows [row0, row0 + part.shape(1)) += part
// (contiguous [B, rows, H, D], f32 or bf16).
void accumulate_rows(float* acc, int64_t S_acc, int64_t row0, const Tensor& part);

// dst (f32 or bf16, contiguous) = src (f32, contiguous, same numel).
void store_f32(const float* src, const Tensor& dst);

// Runs fn, adding its wall time to one field of the caller's stats (if it asked for them).
template <class F>
void timed(RingAttentionStats* stats, double RingAttentionStats::*field, F&& fn) {
  if (!stats) return fn();
  const double start = now_seconds();
  fn();
  stats->*field += now_seconds() - start;
}
inline constexpr double RingAttentionStats::*kCompute = &RingAttentionStats::compute_s;
inline constexpr double RingAttentionStats::*kComm = &RingAttentionStats::comm_s;

// A ring step's K/V shard, and whether it had arrived by the end of the step's compute.
inline void note_shard(RingAttentionStats* stats, bool arrived) {
  if (!stats) return;
  ++stats->shards;
  stats->shards_arrived += arrived;
}

}  // namespace sol::cp::detail
