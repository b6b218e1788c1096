#pragma once
// sol::softmax on the device: one 256-thread block per row at a time (grid-stride over rows).
// A row of at most kSoftmaxCachedElems elements with 16-byte vectors (DeepSeek-V3's 7168) is
// loaded once into registers, up to 4 vectors of 8 per thread all in flight together, and each
// exponential is computed once and kept there for the output: the exponential (~20 f32
// instructions) done twice per element made the kernel issue-bound rather than memory-bound.
// Longer or unaligned rows take three sweeps (maximum, sum of exponentials, output), the second
// and third from L2, so DRAM still sees each input byte once and each output byte once.
// Vectors of 8 elements (16-byte loads/stores) when the host found n % 8 == 0 and both rows
// 16-byte aligned, else one element per thread step.
// Results: the exponential is exp_f32 (device_exp_math.cuh, the CPU's AVX-512 exp16), in f32;
// the sum is taken per thread in its element order, then across the warp (xor butterfly) and the
// 8 warps in order: an order the CPU does not share, so the device matches the CPU within f32
// rounding (~1e-6 relative), not bit for bit. Both row paths visit a thread's elements in the
// same order, so they give the same bits. The maximum propagates NaN: a row with a NaN or a
// +inf becomes NaN, -inf entries get exactly 0 (exp_f32(-inf) underflows to +0), as on the CPU.
#include "kernels/cuda/device_exp_math.cuh"
#include "kernels/cuda/vec_io.cuh"

namespace sol_cuda {

const int kSoftmaxThreads = 256;
// Vectors of 8 a thread keeps in registers, and the longest row kept whole that way.
const int kSoftmaxCachedVecs = 4;
const long long kSoftmaxCachedElems = kSoftmaxThreads * 8LL * kSoftmaxCachedVecs;

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

// One row of n <= kSoftmaxCachedElems elements (n % 8 == 0, 16-byte aligned rows): thread t
// holds vectors t, t + 256, ... in registers, in the element order of the three-sweep loops.
template <bool kInBf16, bool kOutBf16>
__device__ __forceinline__ void softmax_row_cached(const char* xr, char* yr, long long n, float* shared) {
  constexpr int kIn = kCodeOf<kInBf16>, kOut = kCodeOf<kOutBf16>;
  const int xs = kInBf16 ? 2 : 4, ys = kOutBf16 ? 2 : 4;
  // The first element of this thread's k-th vector; the vector is in the row when it is < n.
  const auto at = [](int k) { return (threadIdx.x + k * kSoftmaxThreads) * 8LL; };
  float v[kSoftmaxCachedVecs][8];
#pragma unroll
  for (int k = 0; k < kSoftmaxCachedVecs; ++k)
    if (at(k) < n) load8<kIn>(xr + at(k) * xs, true, v[k]);
  float m = -__int_as_float(0x7f800000);
#pragma unroll
  for (int k = 0; k < kSoftmaxCachedVecs; ++k)
    if (at(k) < n)
#pragma unroll
      for (int j = 0; j < 8; ++j) m = max_nan(m, v[k][j]);
  m = block_reduce<true>(m, shared);
  float sum = 0;
#pragma unroll
  for (int k = 0; k < kSoftmaxCachedVecs; ++k)
    if (at(k) < n)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        v[k][j] = exp_f32(v[k][j] - m);
        sum += v[k][j];
      }
  const float inv = 1.0f / block_reduce<false>(sum, shared);
#pragma unroll
  for (int k = 0; k < kSoftmaxCachedVecs; ++k)
    if (at(k) < n) {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[k][j] *= inv;
      store8<kOut>(yr + at(k) * ys, true, v[k]);
    }
}

template <bool kInBf16, bool kOutBf16, bool kVec>
__device__ __forceinline__ void softmax_rows(const void* x, void* y, long long rows, long long n) {
  __shared__ float shared[kSoftmaxThreads / 32];
  constexpr int kIn = kCodeOf<kInBf16>, kOut = kCodeOf<kOutBf16>;
  const int xs = kInBf16 ? 2 : 4, ys = kOutBf16 ? 2 : 4;
  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
    const char* xr = static_cast<const char*>(x) + r * n * xs;
    char* yr = static_cast<char*>(y) + r * n * ys;
    if (kVec && n <= kSoftmaxCachedElems) {
      softmax_row_cached<kInBf16, kOutBf16>(xr, yr, n, shared);
      continue;
    }
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
