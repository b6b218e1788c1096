#pragma once
// One consumer's 128-K block of the fp8 block-scaled GEMM (DeepGEMM's recipe,
// sm90_fp8_promotion.h), the one function both the one-tile and the persistent kernels run:
// wait for the stage, sum the block into a fresh partial with QGMMA (scale-d 0 on the first),
// load the block's scales, wait for the partial, free the stage, promote the partial into the
// f32 sum on the CUDA cores. The scales are loaded after the QGMMAs are issued, so their latency
// hides behind them: loaded earlier, the compiler places their product (A scale x B scale) ahead
// of the first QGMMA, and the in-order issue waits for the loads.
//
// Two consumers (each its own 64-row half of BLOCK_M, sharing the stage's B) take turns to
// issue their QGMMAs, in the order of sm90_gemm_fp8_order.h: consumer 1 issues block k after
// consumer 0 has, consumer 0 issues block k + 1 after consumer 1 has issued block k. The tensor
// cores then run one consumer's block while the other waits for its own and promotes it, so the
// promotion no longer leaves them idle (without the order both consumers issue together, wait
// together and promote together). The turns are two named barriers of both warpgroups' 256
// threads: the waiting one syncs, the other arrives without waiting.

#include "kernels/cuda/sm90/sm90_cluster.cuh"
#include "kernels/cuda/sm90/sm90_fp8_promotion.h"
#include "kernels/cuda/sm90/sm90_fragment.h"
#include "kernels/cuda/sm90/sm90_gemm_fp8_order.h"
#include "kernels/cuda/sm90/sm90_mbarrier.cuh"
#include "kernels/cuda/sm90/sm90_wgmma.cuh"

namespace sol::kernels::sm90 {

// Named barrier 3 is consumer 0's turn, 4 consumer 1's (1 and 2 are the store epilogue's).
SOL_SM90_DEVICE void fp8_turn_wait(u32 consumer) {
  if (consumer == 0)
    asm volatile("bar.sync 3, 256;\n" ::: "memory");
  else
    asm volatile("bar.sync 4, 256;\n" ::: "memory");
}
SOL_SM90_DEVICE void fp8_turn_pass(u32 consumer) {
  if (consumer == 0)
    asm volatile("bar.arrive 4, 256;\n" ::: "memory");
  else
    asm volatile("bar.arrive 3, 256;\n" ::: "memory");
}

// The partial sums of one K block into the f32 sums: each column with the scale of its B block,
// the tile's first FirstCols columns the first block's (fp8_first_block_cols), the rest the next
// block's; which register holds which column is compile-time (fp8_reg_in_second_block).
template <class Plan, u32 FirstCols>
SOL_SM90_DEVICE void fp8_promote_tile(Accum<Plan::block_n>& sum, const Accum<Plan::block_n>& partial,
                                      const float (&scale_a)[2], const float (&scale_b)[2]) {
#pragma unroll
  for (u32 i = 0; i < Plan::block_n / 2; ++i)
    sum.d[i] = fp8_promote(sum.d[i], partial.d[i], scale_a[accum_row_half(i)],
                           scale_b[fp8_reg_in_second_block(i, FirstCols) ? 1 : 0]);
}

// One K block on ring stage `stage` (full barrier parity `parity`) of the tile whose first column
// is col0; `issued`: the blocks this consumer issued before, over all its tiles (counted up
// here); `load_scales(scale_a, scale_b)` fetches the block's A scales of the thread's two rows
// and the B scales of the tile's first and (192-column tiles) second scale block.
template <class Plan, class LoadScales>
SOL_SM90_DEVICE void fp8_consumer_k_block(Accum<Plan::block_n>& sum, Accum<Plan::block_n>& partial, u32 base,
                                          u32 consumer, u32 stage, u32 parity, u32& issued, u32 col0,
                                          const LoadScales& load_scales) {
  static_assert(Plan::element_bytes == 1 && Plan::block_k == kFp8ScaleBlock &&
                    (Plan::block_n == kFp8ScaleBlock || Plan::block_n == 192),
                "one 128-K block per stage; a tile of one scale block, or of 192 columns over two");
  static_assert(Plan::consumers <= 2, "the issue order is for one or two consumers");
  constexpr bool ordered = Plan::consumers == 2;
  mbar_wait(base + Plan::full_barrier_offset(stage), parity);
  if (ordered && fp8_waits_turn(consumer, issued)) fp8_turn_wait(consumer);
  fence_accumulator(partial);
  wgmma_fence();
#pragma unroll
  for (u32 mma = 0; mma < Plan::mmas_per_k_block; ++mma)
    wgmma_e4m3<Plan::block_n>(partial, Plan::desc_a(base, stage, consumer, mma), Plan::desc_b(base, stage, mma),
                              fp8_partial_scale_d(mma));
  wgmma_commit();
  if (ordered) fp8_turn_pass(consumer);
  ++issued;
  float scale_a[2], scale_b[2];  // after the commit (a memory clobber): the loads cannot move above it
  load_scales(scale_a, scale_b);
  wgmma_wait<0>();
  fence_accumulator(partial);
  release_stage<Plan>(base, stage);
  if constexpr (Plan::block_n == kFp8ScaleBlock)
    fp8_promote_tile<Plan, kFp8ScaleBlock>(sum, partial, scale_a, scale_b);
  else if (fp8_first_block_cols(col0) == kFp8ScaleBlock)  // the tile starts on a scale block
    fp8_promote_tile<Plan, kFp8ScaleBlock>(sum, partial, scale_a, scale_b);
  else  // half way into one
    fp8_promote_tile<Plan, kFp8ScaleBlock / 2>(sum, partial, scale_a, scale_b);
}

// After a consumer's last block: consumer 0 takes consumer 1's last pass (sm90_gemm_fp8_order.h).
template <class Plan>
SOL_SM90_DEVICE void fp8_consumer_finish(u32 consumer, u32 issued) {
  if (Plan::consumers == 2 && fp8_takes_last_turn(consumer, issued)) fp8_turn_wait(consumer);
}

}  // namespace sol::kernels::sm90
