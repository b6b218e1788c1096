#pragma once
// The activation kernels (activation.cuh), named with the input's and output's sol::DType codes
// (0 f32, 1 bf16): the program the activation ops load (src/ops/activation/activation_cuda.cc)
// and the offline checks build (tests/kernels/cuda/activation_kernels.cu). `vec`: every row
// of every operand is 16-byte aligned.
#include "kernels/cuda/activation.cuh"

#define SOL_CUDA_ACTIVATION(t, yt)                                                                                \
  extern "C" __global__ void __launch_bounds__(256) sol_silu_mul_##t##_##yt(                                      \
      const void* gu, long long gu_stride, void* y, long long y_stride, long long rows, long long inter, int vec) { \
    sol_cuda::elementwise_rows<yt>(rows, inter, vec != 0, y, y_stride, sol_cuda::SiluMulSource<t>{gu, gu_stride, inter}, \
                                   sol_cuda::SiluMulSource<t>{gu, gu_stride, inter});                              \
  }                                                                                                                 \
  extern "C" __global__ void __launch_bounds__(256) sol_gelu_##t##_##yt(                                          \
      const void* x, long long x_stride, void* y, long long y_stride, long long rows, long long cols, int erf_form,  \
      int vec) {                                                                                                    \
    sol_cuda::elementwise_rows<yt>(rows, cols, vec != 0, y, y_stride, sol_cuda::GeluSource<t>{x, x_stride, erf_form}, \
                                   sol_cuda::GeluSource<t>{x, x_stride, erf_form});                                \
  }
#define SOL_CUDA_ACTIVATION_QUANT(t)                                                                              \
  extern "C" __global__ void __launch_bounds__(256) sol_silu_mul_quant_##t(                                       \
      const void* gu, long long gu_stride, long long rows, long long inter, int vec, sol_cuda::QuantOut out) {    \
    typedef sol_cuda::SiluMulSource<t> S;                                                                         \
    sol_cuda::quant_rows(sol_cuda::Bf16Rounded16<S>{S{gu, gu_stride, inter}, vec}, rows, inter, out);             \
  }                                                                                                               \
  extern "C" __global__ void __launch_bounds__(256) sol_gelu_quant_##t(                                           \
      const void* x, long long x_stride, long long rows, long long cols, int erf_form, int vec,                   \
      sol_cuda::QuantOut out) {                                                                                   \
    typedef sol_cuda::GeluSource<t> S;                                                                            \
    sol_cuda::quant_rows(sol_cuda::Bf16Rounded16<S>{S{x, x_stride, erf_form}, vec}, rows, cols, out);             \
  }

SOL_CUDA_ACTIVATION(0, 0)
SOL_CUDA_ACTIVATION(0, 1)
SOL_CUDA_ACTIVATION(1, 0)
SOL_CUDA_ACTIVATION(1, 1)
SOL_CUDA_ACTIVATION_QUANT(0)
SOL_CUDA_ACTIVATION_QUANT(1)
