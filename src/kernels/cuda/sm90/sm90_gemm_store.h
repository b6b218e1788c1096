#pragma once
// The TMA-store epilogue's staging layout (sm90_gemm_store.cuh stores through it; the CPU model
// runs the same functions). A consumer warpgroup's 64 rows of D leave in boxes of 64 rows by one
// 128-byte swizzled row of columns (64 bf16 or 32 f32): each thread writes its accumulator pairs
// of one box into a staging buffer, the warpgroup synchronises, and one thread stores the box
// with cp.async.bulk.tensor (the tensor map of D has this box and the 128-byte swizzle, so TMA
// clips rows and columns past D's edge). Each consumer owns kStoreBuffers buffers and alternates
// between them, so the box being written never is the one TMA may still be reading.
//
// A thread's pair (registers i, i + 1: two adjacent columns of one row, sm90_fragment.h) is one
// 4-byte (bf16x2) or 8-byte (f32x2) store at the swizzled address of its row and column. A
// warp's 32 lanes write 8 rows x 4 pairs: the swizzle spreads the 8 rows over the 8 16-byte
// chunks of a 128-byte line, so a bf16 store of one warp touches every bank once.

#include "kernels/cuda/sm90/sm90_fragment.h"
#include "kernels/cuda/sm90/sm90_swizzle.h"

namespace sol::kernels::sm90 {

inline constexpr Swizzle kStoreSwizzle = Swizzle::b128;
inline constexpr u32 kStoreRowBytes = 128;  // one swizzled row per box row
inline constexpr u32 kStoreBoxRows = 64;    // one consumer's m64 row block
inline constexpr u32 kStoreBoxBytes = kStoreBoxRows * kStoreRowBytes;
inline constexpr u32 kStoreBuffers = 2;  // per consumer: write one while TMA reads the other

// Staging bytes of a tile of block_m rows (one m64 row block per consumer).
SOL_SM90_HD constexpr u32 store_staging_bytes(u32 block_m) {
  return block_m / kStoreBoxRows * kStoreBuffers * kStoreBoxBytes;
}

// Columns of one box and boxes per BlockN-wide tile for D elements of `out_bytes` (2 or 4).
SOL_SM90_HD constexpr u32 store_box_cols(u32 out_bytes) { return kStoreRowBytes / out_bytes; }
SOL_SM90_HD constexpr u32 store_boxes(u32 block_n, u32 out_bytes) { return block_n / store_box_cols(out_bytes); }

// Registers of box `box`: columns 8 * (i / 4) .. + 7 lie in it exactly for these i (the box is a
// multiple of 8 columns wide), so a box is a contiguous run of every thread's registers.
SOL_SM90_HD constexpr u32 store_box_first_reg(u32 box, u32 out_bytes) { return box * store_box_cols(out_bytes) / 2; }
SOL_SM90_HD constexpr u32 store_box_regs(u32 out_bytes) { return store_box_cols(out_bytes) / 2; }

// Byte offset, from a staging buffer aligned to the swizzle period, of the pair at registers
// (reg, reg + 1) of thread `thread` (0..127 of the warpgroup), reg even.
SOL_SM90_HD constexpr u32 store_pair_offset(u32 thread, u32 reg, u32 out_bytes) {
  const u32 col = accum_col(thread, reg) % store_box_cols(out_bytes);
  return swizzle_address(kStoreSwizzle, accum_row(thread, reg) * kStoreRowBytes + col * out_bytes);
}

}  // namespace sol::kernels::sm90
