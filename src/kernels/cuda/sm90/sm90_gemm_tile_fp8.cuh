#pragma once
// The sm90 GEMM tile kernel with DeepGEMM's fine-grained fp8 scaling (sm90_fp8_promotion.h):
// the same producer, ring and epilogue as sm90_gemm_tile.cuh, but each consumer sums one 128-K
// block into a fresh partial accumulator (scale-d 0 on the block's first wgmma), waits for it,
// frees the stage at once, and promotes the partial into its f32 sum with the row's A scale and
// the tile's B scale. K must be a multiple of 128 (as on the CPU); scales as the CPU path lays
// them out. The A scales of a thread's two rows and the tile's B scale are loaded before the
// full barrier is waited on, so their latency hides behind the TMA of the block.

#include "kernels/cuda/sm90/sm90_fp8_promotion.h"
#include "kernels/cuda/sm90/sm90_gemm_tile.cuh"

namespace sol::kernels::sm90 {

template <class Plan>
SOL_SM90_DEVICE void gemm_tile_fp8_consumer(u32 consumer, u32 base, const float* scales_a, const float* scales_b,
                                            const TmaDescriptor* map_d, u32 m, u32 n, u32 k) {
  static_assert(Plan::element_bytes == 1 && Plan::block_k == kFp8ScaleBlock && Plan::block_n == kFp8ScaleBlock,
                "one 128-K block per stage and one B scale block per tile");
  Accum<Plan::block_n> sum, partial;
#pragma unroll
  for (u32 i = 0; i < Plan::block_n / 2; ++i) sum.d[i] = 0.0f;
  const u32 t = thread_in_warpgroup(), k_blocks = Plan::k_blocks(k);
  const u32 row_upper = blockIdx.y * Plan::block_m + consumer * Plan::consumer_rows + accum_row(t, 0);
  const u32 rows[2] = {row_upper, row_upper + 8};
  RingCursor<Plan::stages> ring;
#pragma unroll 1
  for (u32 kb = 0; kb < k_blocks; ++kb, ring.advance()) {
    float scale_a[2];
#pragma unroll
    for (u32 h = 0; h < 2; ++h) scale_a[h] = rows[h] < m ? scales_a[fp8_scale_a_index(rows[h], kb, k_blocks)] : 0.0f;
    const float scale_b = scales_b[fp8_scale_b_index(blockIdx.x * Plan::block_n, kb, k_blocks)];

    mbar_wait(base + Plan::full_barrier_offset(ring.stage), ring.full_parity());
    fence_accumulator(partial);
    wgmma_fence();
#pragma unroll
    for (u32 mma = 0; mma < Plan::mmas_per_k_block; ++mma)
      wgmma_e4m3<Plan::block_n>(partial, Plan::desc_a(base, ring.stage, consumer, mma),
                                Plan::desc_b(base, ring.stage, mma), fp8_partial_scale_d(mma));
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulator(partial);
    if (t == 0) mbar_arrive(base + Plan::empty_barrier_offset(ring.stage));
#pragma unroll
    for (u32 i = 0; i < Plan::block_n / 2; ++i)
      sum.d[i] = fp8_promote(sum.d[i], partial.d[i], scale_a[accum_row_half(i)], scale_b);
  }
  gemm_tile_store<Plan>(sum, consumer, base, map_d, m, n);
}

template <class Plan>
SOL_SM90_DEVICE void gemm_tile_fp8(const TmaDescriptor* map_a, const TmaDescriptor* map_b, const TmaDescriptor* map_d,
                                   const float* scales_a, const float* scales_b, u32 m, u32 n, u32 k) {
  const u32 base = gemm_tile_setup<Plan>(map_a, map_b, map_d);
  if (warpgroup_index() == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) gemm_tile_producer<Plan>(map_a, map_b, base, k);
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    gemm_tile_fp8_consumer<Plan>(warpgroup_index() - 1, base, scales_a, scales_b, map_d, m, n, k);
  }
}

}  // namespace sol::kernels::sm90
