#pragma once
// Device kernels of sol::copy and sol::cast on contiguous tensors. Each thread moves 16-byte
// vectors (LDG.128 / STG.128) over a grid-stride loop; the elements after the last whole vector,
// and buffers not 16-byte aligned (the host checks), go element by element.
#include "kernels/cuda/convert_math.cuh"

namespace sol_cuda {

struct alignas(16) Vec16 {
  u32 x, y, z, w;
};

__device__ __forceinline__ long long thread_index() {
  return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ long long thread_count() { return (long long)gridDim.x * blockDim.x; }

// bytes of src to dst; `vectors` = 0 when either pointer is not 16-byte aligned.
__device__ __forceinline__ void copy_bytes(const u8* __restrict__ src, u8* __restrict__ dst, long long bytes,
                                           int vectors) {
  const long long whole = vectors ? bytes / 16 : 0;
  const Vec16* s = reinterpret_cast<const Vec16*>(src);
  Vec16* d = reinterpret_cast<Vec16*>(dst);
  for (long long i = thread_index(); i < whole; i += thread_count()) d[i] = s[i];
  for (long long i = whole * 16 + thread_index(); i < bytes; i += thread_count()) dst[i] = src[i];
}

// n elements From -> To. A vector step converts kLanes elements: 16 bytes of the narrower side,
// one or more 16-byte vectors of the wider one.
template <int kFrom, int kTo>
__device__ __forceinline__ void cast_elements(const void* __restrict__ src, void* __restrict__ dst, long long n,
                                              int vectors) {
  typedef typename Format<kFrom>::bits In;
  typedef typename Format<kTo>::bits Out;
  const int kNarrow = sizeof(In) < sizeof(Out) ? sizeof(In) : sizeof(Out);
  const int kLanes = 16 / kNarrow;
  const int kInVectors = kLanes * sizeof(In) / 16, kOutVectors = kLanes * sizeof(Out) / 16;
  const In* in = static_cast<const In*>(src);
  Out* out = static_cast<Out*>(dst);
  const long long steps = vectors ? n / kLanes : 0;
  for (long long v = thread_index(); v < steps; v += thread_count()) {
    Vec16 raw_in[kInVectors], raw_out[kOutVectors];
    const Vec16* from = reinterpret_cast<const Vec16*>(in + v * kLanes);
#pragma unroll
    for (int j = 0; j < kInVectors; ++j) raw_in[j] = from[j];
    const In* lanes_in = reinterpret_cast<const In*>(raw_in);
    Out* lanes_out = reinterpret_cast<Out*>(raw_out);
#pragma unroll
    for (int j = 0; j < kLanes; ++j) lanes_out[j] = convert_bits<kFrom, kTo>(lanes_in[j]);
    Vec16* to = reinterpret_cast<Vec16*>(out + v * kLanes);
#pragma unroll
    for (int j = 0; j < kOutVectors; ++j) to[j] = raw_out[j];
  }
  for (long long i = steps * kLanes + thread_index(); i < n; i += thread_count())
    out[i] = convert_bits<kFrom, kTo>(in[i]);
}

}  // namespace sol_cuda

extern "C" __global__ void sol_copy_bytes(const void* src, void* dst, long long bytes, int vectors) {
  sol_cuda::copy_bytes(static_cast<const sol_cuda::u8*>(src), static_cast<sol_cuda::u8*>(dst), bytes, vectors);
}

// sol_cast_<from>_<to> for one ordered pair of float formats (codes as sol::DType); the
// program that includes this header instantiates the pairs it needs.
#define SOL_CUDA_CAST_KERNEL(from, to)                                                                   \
  extern "C" __global__ void sol_cast_##from##_##to(const void* src, void* dst, long long n, int vectors) { \
    sol_cuda::cast_elements<from, to>(src, dst, n, vectors);                                             \
  }
