#pragma once
// The RMSNorm kernels (rmsnorm.cuh) for every f32/bf16 combination of their operands, named
// with the operands' sol::DType codes (0 f32, 1 bf16) in argument order: the program the norm
// ops load (src/ops/norm/rmsnorm_cuda.cc) and the offline checks build
// (tests/kernels/cuda/rmsnorm_kernels.cu). Each launches with h elements of the staged row's
// type as dynamic shared memory, one CTA of 256 threads per row.
#include "kernels/cuda/rmsnorm.cuh"

#define SOL_CUDA_RMSNORM(x, w, y)                                                                              \
  extern "C" __global__ void __launch_bounds__(256) sol_rmsnorm_##x##_##w##_##y(                               \
      const void* xp, long long x_stride, void* yp, long long y_stride, const void* wp, long long h, float eps, \
      int flags) {                                                                                             \
    sol_cuda::rmsnorm_row<x, w, y>(xp, x_stride, yp, y_stride, wp, h, eps, flags);                             \
  }
#define SOL_CUDA_ADD_RMSNORM(x, r, w, y)                                                                            \
  extern "C" __global__ void __launch_bounds__(256) sol_add_rmsnorm_##x##_##r##_##w##_##y(                          \
      const void* xp, long long x_stride, void* rp, long long r_stride, void* yp, long long y_stride, const void* wp, \
      long long h, float eps, int flags) {                                                                          \
    sol_cuda::add_rmsnorm_row<x, r, w, y>(xp, x_stride, rp, r_stride, yp, y_stride, wp, h, eps, flags);             \
  }
#define SOL_CUDA_RMSNORM_QUANT(x, w)                                                                              \
  extern "C" __global__ void __launch_bounds__(256) sol_rmsnorm_quant_##x##_##w(                                  \
      const void* xp, long long x_stride, const void* wp, long long h, float eps, int flags,                      \
      sol_cuda::QuantOut out) {                                                                                   \
    sol_cuda::rmsnorm_quant_row<x, w>(xp, x_stride, wp, h, eps, flags, out);                                      \
  }

#define SOL_CUDA_RMSNORM_Y(x, w) SOL_CUDA_RMSNORM(x, w, 0) SOL_CUDA_RMSNORM(x, w, 1)
#define SOL_CUDA_RMSNORM_W(x) SOL_CUDA_RMSNORM_Y(x, 0) SOL_CUDA_RMSNORM_Y(x, 1) SOL_CUDA_RMSNORM_QUANT(x, 0) SOL_CUDA_RMSNORM_QUANT(x, 1)
SOL_CUDA_RMSNORM_W(0)
SOL_CUDA_RMSNORM_W(1)

#define SOL_CUDA_ADD_RMSNORM_Y(x, r, w) SOL_CUDA_ADD_RMSNORM(x, r, w, 0) SOL_CUDA_ADD_RMSNORM(x, r, w, 1)
#define SOL_CUDA_ADD_RMSNORM_W(x, r) SOL_CUDA_ADD_RMSNORM_Y(x, r, 0) SOL_CUDA_ADD_RMSNORM_Y(x, r, 1)
#define SOL_CUDA_ADD_RMSNORM_R(x) SOL_CUDA_ADD_RMSNORM_W(x, 0) SOL_CUDA_ADD_RMSNORM_W(x, 1)
SOL_CUDA_ADD_RMSNORM_R(0)
SOL_CUDA_ADD_RMSNORM_R(1)
