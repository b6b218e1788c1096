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
