#pragma once
// The sm90 GEMM tile kernel with DeepGEMM's fine-grained fp8 scaling (sm90_fp8_promotion.h):
// the same producer, ring and epilogue as sm90_gemm_tile.cuh, but each consumer runs
// fp8_consumer_k_block (sm90_gemm_fp8_block.cuh, shared with the persistent kernel) per 128-K
// block: a fresh partial, waited for, the stage freed at once, promoted into its f32 sum with
// the row's A scale and the tile's B scale; two consumers take turns to issue, so one's
// promotion overlaps the other's QGMMA. K must be a multiple of 128 (as on the CPU); scales as
// the CPU path lays them out. The A scales of a thread's two rows and the tile's B scale are
// loaded while the block's QGMMAs run (fp8_consumer_k_block), so no issue waits for them.

#include "kernels/cuda/sm90/sm90_gemm_fp8_block.cuh"
#include "kernels/cuda/sm90/sm90_gemm_tile.cuh"

namespace sol::kernels::sm90 {

template <class Plan>
SOL_SM90_DEVICE void gemm_tile_fp8_consumer(u32 consumer, u32 base, const float* scales_a, const float* scales_b,
                                            const TmaDescriptor* map_d, u32 m, u32 n, u32 k) {
  Accum<Plan::block_n> sum, partial;
#pragma unroll
  for (u32 i = 0; i < Plan::block_n / 2; ++i) sum.d[i] = 0.0f;
  const u32 t = thread_in_warpgroup(), k_blocks = Plan::k_blocks(k);
  const u32 row_upper = blockIdx.y * Plan::block_m + consumer * Plan::consumer_rows + accum_row(t, 0);
  const u32 rows[2] = {row_upper, row_upper + 8};
  RingCursor<Plan::stages> ring;
  u32 issued = 0;
#pragma unroll 1
  for (u32 kb = 0; kb < k_blocks; ++kb, ring.advance()) {
    const u32 col0 = blockIdx.x * Plan::block_n;
    const auto load_scales = [&](float (&scale_a)[2], float (&scale_b)[2]) {
#pragma unroll
      for (u32 h = 0; h < 2; ++h)
        scale_a[h] = rows[h] < m ? scales_a[fp8_scale_a_index(rows[h], kb, k_blocks)] : 0.0f;
      scale_b[0] = scales_b[fp8_scale_b_index(col0, kb, k_blocks)];
      if constexpr (Plan::block_n > kFp8ScaleBlock)
        scale_b[1] = scales_b[fp8_scale_b_index(fp8_second_block_col(col0, n), kb, k_blocks)];
      else
        scale_b[1] = scale_b[0];
    };
    fp8_consumer_k_block<Plan>(sum, partial, base, consumer, ring.stage, ring.full_parity(), issued, col0,
                               load_scales);
  }
  fp8_consumer_finish<Plan>(consumer, issued);
  gemm_tile_store<Plan>(sum, consumer, base, map_d, m, n);
}

template <class Plan>
SOL_SM90_DEVICE void gemm_tile_fp8(const TmaDescriptor* map_a, const TmaDescriptor* map_b, const TmaDescriptor* map_d,
                                   const float* scales_a, const float* scales_b, u32 m, u32 n, u32 k) {
  static_assert(Plan::cluster_m == 1, "one tile per CTA: B multicast is the persistent kernel's");
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
