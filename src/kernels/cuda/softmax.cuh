#pragma once
// sol::softmax on the device: one 256-thread block per row at a time (grid-stride over rows),
// three sweeps of the row (maximum, sum of exponentials, output), the second and third from L2
// (a row is at most tens of KiB), so DRAM sees each input byte once and each output byte once.
// Vectors of 8 elements (16-byte loads/stores) when the host found n % 8 == 0 and both rows
// 16-byte aligned, else one element per thread step.
// Results: the exponential is exp_f32 (device_exp_math.cuh, the CPU's AVX-512 exp16), in f32;
// the sum is taken per thread in its element order, then across the warp (xor butterfly) and the
// 8 warps in order: an order the CPU does not share, so the device matches the CPU within f32
// rounding (~1e-6 relative), not bit for bit. The maximum propagates NaN: a row with a NaN or a
// +inf becomes NaN, -inf entries get exactly 0 (exp_f32(-inf) underflows to +0), as on the CPU.
#include "kernels/cuda/device_exp_math.cuh"
#include "kernels/cuda/vec_io.cuh"

namespace sol_cuda {

const int kSoftmaxThreads = 256;

// max that keeps a NaN from either side.
__device__ __forceinline__ float max_nan(float a, float b) { return (a != a || a > b) ? a : b; }

template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* shared) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xFFFFFFFFu, v, o);
    v = kMax ? max_nan(v, u) : v + u;
  }
  const int warp = threadIdx.x / 32, warps = kSoftmaxThreads / 32;
  __syncthreads();  // the previous reduction's readers are done with `shared`
  if ((threadIdx.x & 31) == 0) shared[warp] = v;
  __syncthreads();
  float r = shared[0];
#pragma unroll
  for (int i = 1; i < warps; ++i) r = kMax ? max_nan(r, shared[i]) : r + shared[i];
  return r;
}

template <bool kInBf16, bool kOutBf16, bool kVec>
__device__ __forceinline__ void softmax_rows(const void* x, void* y, long long rows, long long n) {
  __shared__ float shared[kSoftmaxThreads / 32];
  constexpr int kIn = kCodeOf<kInBf16>, kOut = kCodeOf<kOutBf16>;
  const int xs = kInBf16 ? 2 : 4, ys = kOutBf16 ? 2 : 4;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const char* xr = static_cast<const char*>(x) + r * n * xs;
    char* yr = static_cast<char*>(y) + r * n * ys;
    float m = -__int_as_float(0x7f800000);
    if (kVec) {
      for (long long i = threadIdx.x * 8LL; i < n; i += kSoftmaxThreads * 8LL) {
        float v[8];
        load8<kIn>(xr + i * xs, true, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) m = max_nan(m, v[j]);
      }
    } else {
      for (long long i = threadIdx.x; i < n; i += kSoftmaxThreads) m = max_nan(m, Elem<kIn>::get(xr, i));
    }
    m = block_reduce<true>(m, shared);
    float sum = 0;
    if (kVec) {
      for (long long i = threadIdx.x * 8LL; i < n; i += kSoftmaxThreads * 8LL) {
        float v[8];
        load8<kIn>(xr + i * xs, true, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) sum += exp_f32(v[j] - m);
      }
    } else {
      for (long long i = threadIdx.x; i < n; i += kSoftmaxThreads) sum += exp_f32(Elem<kIn>::get(xr, i) - m);
    }
    const float inv = 1.0f / block_reduce<false>(sum, shared);
    if (kVec) {
      for (long long i = threadIdx.x * 8LL; i < n; i += kSoftmaxThreads * 8LL) {
        float v[8];
        load8<kIn>(xr + i * xs, true, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = exp_f32(v[j] - m) * inv;
        store8<kOut>(yr + i * ys, true, v);
      }
    } else {
      for (long long i = threadIdx.x; i < n; i += kSoftmaxThreads)
        Elem<kOut>::put(yr, i, exp_f32(Elem<kIn>::get(xr, i) - m) * inv);
    }
  }
}

}  // namespace sol_cuda

// sol_softmax_<in bf16>_<out bf16>_<vec>: x, y [rows, n] contiguous (y may be x).
#define SOL_CUDA_SOFTMAX_KERNEL(in_bf16, out_bf16, vec)                                                    \
  extern "C" __global__ void __launch_bounds__(256) sol_softmax_##in_bf16##_##out_bf16##_##vec(           \
      const void* x, void* y, long long rows, long long n) {                                              \
    sol_cuda::softmax_rows<in_bf16, out_bf16, vec>(x, y, rows, n);                                        \
  }
