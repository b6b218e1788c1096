#pragma once
// One-CTA-per-tile sm_90a GEMM: D[M, N] (bf16, row-major) = A[M, K] * B[N, K]^T with f32
// accumulation, A and B K-major, bf16 or fp8 e4m3 operands; or, for bf16 with an MN-major plan,
// D = A[M, K] * B[K, N] with B as stored (layout nn). The block decomposition and the
// shared-memory map are GemmTilePlan's (sm90_gemm_plan.h); the CPU model runs the same plan.
//
// Roles: warpgroup 0 gives its registers back and one of its threads walks the K blocks,
// waiting for a free ring stage and loading A's and B's boxes into it with TMA; consumer
// warpgroups 1..Consumers wait for a full stage, issue one wgmma per 32 bytes of K on it and
// free the stage before it once those wgmmas have read it (a ring needs two stages or more).
// The epilogue rounds each accumulator pair to one bf16x2 in a staging buffer and stores D by
// TMA (sm90_gemm_store.cuh; map_d: D [m, n] bf16 in boxes of 64 columns x 64 rows).
// Edges: TMA zero-fills rows and K beyond the tensor on load and clips the store at D's edges,
// so any M, any N that is a multiple of 8 and any K that is a multiple of 16 bytes (the TMA
// stride rule) works. Grid: (tiles along N, tiles along M); block: Plan::threads.

#include "kernels/cuda/sm90/sm90_cluster.cuh"
#include "kernels/cuda/sm90/sm90_fragment.h"
#include "kernels/cuda/sm90/sm90_gemm_plan.h"
#include "kernels/cuda/sm90/sm90_mbarrier.cuh"
#include "kernels/cuda/sm90/sm90_ring.h"
#include "kernels/cuda/sm90/sm90_gemm_store.cuh"

namespace sol::kernels::sm90 {

// One stage's B: one K-major box, or Plan::b_boxes MN-major ones, all credited to `full`; in a
// cluster (Plan::cluster_m > 1) this CTA's slice of the stage, multicast to every CTA of it.
template <class Plan>
SOL_SM90_DEVICE void gemm_load_b(const TmaDescriptor* map_b, u32 full, u32 base, u32 stage, int k0, int n0) {
  if constexpr (Plan::cluster_m > 1) {
    const u32 rank = cluster_ctarank();
    tma_load_2d_multicast(map_b, full, base + Plan::b_box_offset(stage, 0, rank), Plan::b_box_c0(k0, n0, 0),
                          Plan::b_box_c1(k0, n0, 0, rank), Plan::multicast_mask);
  } else {
#pragma unroll
    for (u32 box = 0; box < Plan::b_boxes; ++box)
      tma_load_2d(map_b, full, base + Plan::b_box_offset(stage, box), Plan::b_box_c0(k0, n0, box),
                  Plan::b_box_c1(k0, n0, box));
  }
}

template <class Plan>
SOL_SM90_DEVICE void gemm_tile_producer(const TmaDescriptor* map_a, const TmaDescriptor* map_b, u32 base, u32 k) {
  const int m0 = int(blockIdx.y * Plan::block_m), n0 = int(blockIdx.x * Plan::block_n);
  RingCursor<Plan::stages> ring;
#pragma unroll 1
  for (u32 kb = 0; kb < Plan::k_blocks(k); ++kb, ring.advance()) {
    const u32 full = base + Plan::full_barrier_offset(ring.stage);
    mbar_wait(base + Plan::empty_barrier_offset(ring.stage), ring.empty_parity());
    mbar_arrive_expect_tx(full, Plan::tx_bytes);
    const int k0 = int(kb * Plan::block_k);
    tma_load_2d(map_a, full, base + Plan::a_offset(ring.stage), k0, m0);
    gemm_load_b<Plan>(map_b, full, base, ring.stage, k0, n0);
  }
}

// One consumer's 64 rows of the tile to D (bf16, no epilogue) by TMA store.
template <class Plan>
SOL_SM90_DEVICE void gemm_tile_store(const Accum<Plan::block_n>& acc, u32 consumer, u32 base,
                                     const TmaDescriptor* map_d, u32 m, u32 n) {
  u32 stored_boxes = 0;
  tma_store_block<Plan, 2>(acc, consumer, base, map_d, blockIdx.y * Plan::block_m + consumer * Plan::consumer_rows,
                           blockIdx.x * Plan::block_n, m, n, stored_boxes,
                           [](float x, u32, u32) { return x; });
  tma_store_drain();
}

// One K block of a consumer's wgmmas on ring stage `stage`, accumulating into acc (the one-tile
// and the persistent kernels issue the same sequence).
template <class Plan>
SOL_SM90_DEVICE void gemm_k_block_mmas(Accum<Plan::block_n>& acc, u32 base, u32 stage, u32 consumer) {
#pragma unroll
  for (u32 mma = 0; mma < Plan::mmas_per_k_block; ++mma) {
    const u64 a = Plan::desc_a(base, stage, consumer, mma), b = Plan::desc_b(base, stage, mma);
    if constexpr (Plan::element_bytes == 2)
      wgmma_bf16<Plan::block_n, Plan::b_mn_major>(acc, a, b, 1);
    else
      wgmma_e4m3<Plan::block_n>(acc, a, b, 1);
  }
}

template <class Plan>
SOL_SM90_DEVICE void gemm_tile_consumer(u32 consumer, u32 base, const TmaDescriptor* map_d, u32 m, u32 n, u32 k) {
  Accum<Plan::block_n> acc;
#pragma unroll
  for (u32 i = 0; i < Plan::block_n / 2; ++i) acc.d[i] = 0.0f;
  // Pins the zeros here: sunk past the loop's exit test, ptxas finds them defining accumulator
  // registers inside the wgmma pipeline and serialises it (C7515).
  fence_accumulator(acc);
  // A stage is freed one K block late: after committing block kb, waiting until one group is
  // in flight proves block kb-1's wgmmas have read their stage, while kb's keep the tensor
  // cores busy.
  RingCursor<Plan::stages> ring;
  u32 previous_stage = 0;
#pragma unroll 1
  for (u32 kb = 0; kb < Plan::k_blocks(k); ++kb, ring.advance()) {
    mbar_wait(base + Plan::full_barrier_offset(ring.stage), ring.full_parity());
    fence_accumulator(acc);
    wgmma_fence();
    gemm_k_block_mmas<Plan>(acc, base, ring.stage, consumer);
    wgmma_commit();
    wgmma_wait<1>();
    fence_accumulator(acc);
    if (kb > 0) release_stage<Plan>(base, previous_stage);
    previous_stage = ring.stage;
  }
  wgmma_wait<0>();
  fence_accumulator(acc);
  gemm_tile_store<Plan>(acc, consumer, base, map_d, m, n);
}

// Aligns the shared base to the swizzle period, initialises the ring's barriers and returns the
// base; every thread of the CTA calls it (in a cluster: of every CTA, and none loads or arrives
// into another CTA before that CTA's barriers are initialised).
template <class Plan>
SOL_SM90_DEVICE u32 gemm_tile_setup(const TmaDescriptor* map_a, const TmaDescriptor* map_b,
                                    const TmaDescriptor* map_d) {
  extern __shared__ __align__(1024) u8 smem[];
  constexpr u32 period = swizzle_period_bytes(Plan::swizzle);
  const u32 base = (smem_address(smem) + period - 1) & ~(period - 1);
  if (threadIdx.x == 0) {
    tma_prefetch_descriptor(map_a);
    tma_prefetch_descriptor(map_b);
    tma_prefetch_descriptor(map_d);
    for (u32 s = 0; s < Plan::stages; ++s) {
      mbar_init(base + Plan::full_barrier_offset(s), 1);
      mbar_init(base + Plan::empty_barrier_offset(s), Plan::empty_arrivals);
    }
    mbar_fence_init();
  }
  if constexpr (Plan::cluster_m > 1)
    cluster_sync();
  else
    __syncthreads();
  return base;
}

template <class Plan>
SOL_SM90_DEVICE void gemm_tile(const TmaDescriptor* map_a, const TmaDescriptor* map_b, const TmaDescriptor* map_d,
                               u32 m, u32 n, u32 k) {
  static_assert(Plan::stages >= 2, "consumers free a stage one K block late: one stage would deadlock");
  static_assert(Plan::cluster_m == 1, "one tile per CTA: B multicast is the persistent kernel's");
  const u32 base = gemm_tile_setup<Plan>(map_a, map_b, map_d);
  if (warpgroup_index() == 0) {
    setmaxnreg_dec<kProducerRegs>();
    if (threadIdx.x == 0) gemm_tile_producer<Plan>(map_a, map_b, base, k);
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    gemm_tile_consumer<Plan>(warpgroup_index() - 1, base, map_d, m, n, k);
  }
}

}  // namespace sol::kernels::sm90
