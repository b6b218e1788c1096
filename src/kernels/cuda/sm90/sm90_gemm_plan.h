#pragma once
// The block decomposition of the one-CTA-per-tile sm90 GEMM (sm90_gemm_tile.cuh): tile sizes,
// warpgroup roles, the shared-memory map of the stage ring and the descriptor of every wgmma.
// The kernel and its CPU model (sm90_gemm_model.h) both read it, so the model runs the
// kernel's own addresses and a mistake here fails the model's test.
//
// D[M, N] = A[M, K] * B[N, K]^T, A K-major, B K-major (layout nt: weights as stored) or, with
// BMajor = mn (bf16 only), B stored [K, N] (layout nn) and read MN-major. One CTA computes a
// BlockM x BlockN tile: warpgroup 0 is the producer (one thread issues the TMA loads), the
// Consumers warpgroups after it each own BlockM / Consumers rows (one m64 wgmma row block).
// A K block is one 128-byte swizzled row per tile row: 64 bf16 or 128 fp8 elements. An MN-major
// B stage is BlockN / 64 TMA boxes, each block_k rows of K by one 128-byte swizzled row of 64
// columns of N, packed back to back: the same bytes as the K-major stage, the same tx count.
// ClusterM = 2 (K-major B only): the CTAs of a cluster compute vertically adjacent tiles that
// share B's columns, and CTA r loads slice r of each B stage (BlockN / 2 rows) once, multicast
// into the same offset of both CTAs' rings; so a stage is freed only when the consumers of every
// CTA of the cluster have read it (ClusterM x Consumers arrivals on each empty barrier).

#include "kernels/cuda/sm90/sm90_descriptor.h"
#include "kernels/cuda/sm90/sm90_gemm_store.h"

namespace sol::kernels::sm90 {

// Register split (setmaxnreg): 128 producer threads keep 40, up to 256 consumer threads take 232
// (128 * 40 + 256 * 232 = 64512 of the SM's 65536). The configuration chooser
// (sm90_gemm_config.h) checks its register model against the same numbers.
inline constexpr u32 kProducerRegs = 40;
inline constexpr u32 kConsumerRegs = 232;

template <u32 BlockM, u32 BlockN, u32 Stages, u32 Consumers, u32 ElementBytes, OperandMajor BMajor = OperandMajor::k,
          u32 ClusterM = 1>
struct GemmTilePlan {
  static constexpr u32 block_m = BlockM;
  static constexpr u32 block_n = BlockN;
  static constexpr u32 stages = Stages;
  static constexpr u32 consumers = Consumers;
  static constexpr u32 element_bytes = ElementBytes;
  static constexpr Swizzle swizzle = Swizzle::b128;
  static constexpr u32 row_bytes = swizzle_bytes(swizzle);
  static constexpr u32 block_k = row_bytes / ElementBytes;
  static constexpr u32 mma_k_bytes = 32;  // K bytes of one m64nNk16 (bf16) or m64nNk32 (fp8)
  static constexpr u32 mma_k = mma_k_bytes / ElementBytes;
  static constexpr u32 mmas_per_k_block = row_bytes / mma_k_bytes;
  static constexpr u32 consumer_rows = BlockM / Consumers;
  static constexpr u32 threads = 128 * (1 + Consumers);
  static constexpr OperandMajor b_major = BMajor;
  static constexpr bool b_mn_major = BMajor == OperandMajor::mn;
  static constexpr u32 cluster_m = ClusterM;
  static constexpr u32 empty_arrivals = Consumers * ClusterM;  // every CTA's consumers free a stage
  static constexpr u16 multicast_mask = u16((1u << ClusterM) - 1u);

  static constexpr u32 a_stage_bytes = BlockM * row_bytes;
  static constexpr u32 b_stage_bytes = BlockN * row_bytes;
  static constexpr u32 tx_bytes = a_stage_bytes + b_stage_bytes;  // what a full barrier waits for
  // The TMA-store epilogue's staging buffers (sm90_gemm_store.h) follow the ring: kStoreBuffers
  // boxes of 64 rows x 128 bytes per consumer, 16 KiB each, for bf16 and f32 D alike.
  static constexpr u32 staging_offset = Stages * (a_stage_bytes + b_stage_bytes);
  static constexpr u32 staging_bytes = store_staging_bytes(BlockM);
  static constexpr u32 barrier_offset = staging_offset + staging_bytes;
  static constexpr u32 used_bytes = barrier_offset + 2 * 8 * Stages;
  // Dynamic shared memory is only 16-byte aligned; the kernel rounds its base up to the
  // swizzle period, so it asks for one period more than it uses.
  static constexpr u32 smem_bytes = used_bytes + swizzle_period_bytes(swizzle);

  static_assert(ElementBytes == 1 || ElementBytes == 2, "bf16 or fp8 operands");
  static_assert(consumer_rows == 64, "each consumer warpgroup owns one m64 row block");
  static_assert(BlockN == 64 || BlockN == 128 || BlockN == 256 || (BlockN == 192 && ElementBytes == 1),
                "wgmma N of the consumers (192: the block-scaled fp8 tile)");
  static_assert(BlockM <= 256 && BlockN <= 256, "a TMA box has at most 256 rows");
  static_assert(a_stage_bytes % swizzle_period_bytes(swizzle) == 0 && b_stage_bytes % swizzle_period_bytes(swizzle) == 0,
                "every stage buffer starts on the swizzle period");
  static_assert(smem_bytes <= 227 * 1024, "sm_90 gives a CTA at most 227 KiB of shared memory");
  static_assert(!b_mn_major || ElementBytes == 2, "fp8 wgmma reads K-major operands only");
  static_assert(ClusterM == 1 || (ClusterM == 2 && !b_mn_major),
                "B is multicast in two K-major slices of BlockN / 2 rows; an MN-major B is not split");

  // B's TMA boxes of one stage, in the tensor's own order (innermost first): K-major, one box of
  // block_k x BlockN / ClusterM over B [N, K] per CTA of the cluster; MN-major, b_boxes boxes of
  // 64 columns x block_k rows over B [K, N], box j holding columns 64 j .. 64 j + 63 of the tile.
  static constexpr u32 b_box_inner = b_mn_major ? row_bytes / ElementBytes : block_k;
  static constexpr u32 b_box_outer = b_mn_major ? block_k : BlockN / ClusterM;
  static constexpr u32 b_boxes = b_mn_major ? BlockN / b_box_inner : 1;  // issued by each CTA
  static constexpr u32 b_box_bytes = b_box_outer * row_bytes;
  static_assert(b_boxes * b_box_bytes * ClusterM == b_stage_bytes, "B's boxes fill its stage exactly");
  static_assert(b_box_bytes % swizzle_period_bytes(swizzle) == 0, "every B box starts on the swizzle period");

  // Offsets from the aligned shared base.
  SOL_SM90_HD static constexpr u32 a_offset(u32 stage) { return stage * a_stage_bytes; }
  SOL_SM90_HD static constexpr u32 b_offset(u32 stage) { return Stages * a_stage_bytes + stage * b_stage_bytes; }
  SOL_SM90_HD static constexpr u32 full_barrier_offset(u32 stage) { return barrier_offset + 8 * stage; }
  SOL_SM90_HD static constexpr u32 empty_barrier_offset(u32 stage) { return barrier_offset + 8 * (Stages + stage); }
  // Box `box` of cluster rank `rank`'s slice (rank 0 without a cluster).
  SOL_SM90_HD static constexpr u32 b_box_offset(u32 stage, u32 box, u32 rank = 0) {
    return b_offset(stage) + (rank * b_boxes + box) * b_box_bytes;
  }
  SOL_SM90_HD static constexpr u32 store_buffer_offset(u32 consumer, u32 buffer) {
    return staging_offset + (consumer * kStoreBuffers + buffer) * kStoreBoxBytes;
  }
  // Coordinates (innermost first) of B's box `box` of rank `rank`'s slice for the K block at
  // element k0 and the tile's first column n0 (a row of B [N, K] when K-major).
  SOL_SM90_HD static constexpr int b_box_c0(int k0, int n0, u32 box) {
    return b_mn_major ? n0 + int(box * b_box_inner) : k0;
  }
  SOL_SM90_HD static constexpr int b_box_c1(int k0, int n0, u32 /*box*/, u32 rank = 0) {
    return b_mn_major ? k0 : n0 + int(rank * b_box_outer);
  }

  // Operands of consumer `consumer`'s mma `mma` (0 .. mmas_per_k_block-1) on ring stage `stage`:
  // its 64 rows of A and all BlockN rows of B, K advanced inside the swizzled row.
  SOL_SM90_HD static constexpr u64 desc_a(u32 smem_base, u32 stage, u32 consumer, u32 mma) {
    return kmajor_desc(smem_base + a_offset(stage) + consumer * consumer_rows * row_bytes + mma * mma_k_bytes,
                       swizzle);
  }
  // B: K-major steps inside the swizzled row; MN-major steps mma_k rows of K (2 KiB, two whole
  // 8-row groups: the start stays on the swizzle period) and reaches the next 64 columns one box on.
  SOL_SM90_HD static constexpr u64 desc_b(u32 smem_base, u32 stage, u32 mma) {
    if constexpr (b_mn_major)
      return mnmajor_desc(smem_base + b_offset(stage) + mma * mma_k * row_bytes, swizzle, b_box_bytes);
    else
      return kmajor_desc(smem_base + b_offset(stage) + mma * mma_k_bytes, swizzle);
  }

  SOL_SM90_HD static constexpr u32 k_blocks(u32 k) { return (k + block_k - 1) / block_k; }
  SOL_SM90_HD static constexpr u32 tiles(u32 extent, u32 block) { return (extent + block - 1) / block; }
};

using GemmBf16Plan128x128 = GemmTilePlan<128, 128, 4, 2, 2>;
using GemmE4m3Plan128x128 = GemmTilePlan<128, 128, 4, 2, 1>;
using GemmBf16NnPlan128x128 = GemmTilePlan<128, 128, 4, 2, 2, OperandMajor::mn>;

}  // namespace sol::kernels::sm90
