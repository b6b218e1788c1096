#pragma once
// DeepGEMM's fine-grained fp8 recipe as Sol's CPU GEMM holds it (src/ops/gemm): A scaled per
// row and 128 K (a_scales [M, K/128], row-major), B per 128 x 128 block (b_scales
// [ceil(N/128), K/128]). The tensor cores sum one 128-K block into a fresh f32 partial; the
// CUDA cores then promote it into the running sum, scaled, because the tensor cores' fp8
// accumulation is narrower than f32 and would lose precision over a long K.
// The kernel and its CPU model both call these, so scale indexing and promotion order agree.

#include "kernels/cuda/sm90/sm90_defs.h"

namespace sol::kernels::sm90 {

constexpr u32 kFp8ScaleBlock = 128;

SOL_SM90_HD constexpr u64 fp8_scale_a_index(u32 row, u32 k_block, u32 k_blocks) {
  return u64(row) * k_blocks + k_block;
}

SOL_SM90_HD constexpr u64 fp8_scale_b_index(u32 col, u32 k_block, u32 k_blocks) {
  return u64(col / kFp8ScaleBlock) * k_blocks + k_block;
}

// A block-scaled tile of D's columns col0 .. col0 + block_n - 1 spans at most two 128-column
// scale blocks of B: block_n 128 tiles start on a block, 192 tiles on 0 or 64 within one. Its
// first fp8_first_block_cols(col0) columns take the first block's scale, the rest the next
// block's, read at column fp8_second_block_col (the next block's first column, or n - 1 where
// that is past D: those columns are never stored, and the read stays inside B's scales).
SOL_SM90_HD constexpr u32 fp8_first_block_cols(u32 col0) { return kFp8ScaleBlock - col0 % kFp8ScaleBlock; }
SOL_SM90_HD constexpr u32 fp8_second_block_col(u32 col0, u32 n) {
  return col0 + fp8_first_block_cols(col0) < n ? col0 + fp8_first_block_cols(col0) : n - 1;
}

// Whether accumulator register `reg` of such a tile takes the second block's scale, its first
// `first_cols` columns lying in the first block: the register's group of 8 columns (reg / 4,
// sm90_fragment.h) starts past them (first_cols is 64 or 128, whole groups).
SOL_SM90_HD constexpr bool fp8_reg_in_second_block(u32 reg, u32 first_cols) { return reg / 4 >= first_cols / 8; }

// The scale-d operand of a K block's wgmma `mma`: the first overwrites the partial sums left by
// the previous block, the rest add to them.
SOL_SM90_HD constexpr u32 fp8_partial_scale_d(u32 mma) { return mma > 0 ? 1u : 0u; }

// sum + partial * (scale_a * scale_b): the product of the scales rounded first, then one fused
// multiply-add, as the CPU's AVX-512 path computes it (gemm_bf16_avx512.cc).
SOL_SM90_HD float fp8_promote(float sum, float partial, float scale_a, float scale_b) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(partial, scale_a * scale_b, sum);
#else
  return __builtin_fmaf(partial, scale_a * scale_b, sum);
#endif
}

}  // namespace sol::kernels::sm90
