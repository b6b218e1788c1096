#pragma once
// The FP8 quantization kernels (quant_fp8.cuh) for f32 and bf16 inputs: the program the
// quantization ops load (src/ops/quant/quant_fp8_cuda.cc) and the offline checks build
// (tests/kernels/cuda/quant_fp8_kernels.cu).
#include "kernels/cuda/quant_fp8.cuh"

#define SOL_CUDA_QUANT_KERNELS(code)                                                                            \
  extern "C" __global__ void __launch_bounds__(256) sol_quant_per_token_##code(                                 \
      const void* x, long long x_stride, int x_vec, long long rows, long long cols, sol_cuda::QuantOut out) {  \
    sol_cuda::quant_per_token<code>(x, x_stride, x_vec, rows, cols, out);                                      \
  }                                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) sol_quant_per_block_##code(                                 \
      const void* w, long long w_stride, int w_vec, long long rows, sol_cuda::QuantOut out) {                  \
    sol_cuda::quant_per_block<code>(w, w_stride, w_vec, rows, out);                                            \
  }

// f32 (0) and bf16 (1) inputs, numbered as sol::DType.
SOL_CUDA_QUANT_KERNELS(0)
SOL_CUDA_QUANT_KERNELS(1)
