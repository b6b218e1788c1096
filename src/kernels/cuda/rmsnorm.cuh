#pragma once
// RMSNorm on the device, one CTA per row, with the CPU path's statistics bit for bit
// (rms_math.cuh). The row is read from memory once, with 16-byte vectors, into shared memory;
// 64 threads then run the 64 partial-sum chains over it in the CPU's order (the order caps that
// step at 64 threads, and shared memory makes each chain's loads cheap), thread 0 combines them,
// and every thread writes its share of the output from shared memory.
//   rmsnorm:        y = round_y((x * inv) * w)
//   add_rmsnorm:    residual = round_r(residual + x), written back as it is staged; the
//                   statistics are taken of that stored value
//   rmsnorm_quant:  per-token FP8 codes and scales of round_bf16((x * inv) * w) (quant_fp8.cuh)
#include "kernels/cuda/quant_fp8.cuh"
#include "kernels/cuda/rms_math.cuh"

namespace sol_cuda {

// Kernel flags: which operands' rows are 16-byte aligned (their base and row stride).
enum RmsFlags { kRowsAligned = 1, kOutAligned = 2, kWeightAligned = 4 };

extern __shared__ uint4 sol_rms_row[];  // the staged row, h elements of its type

template <int kS>
__device__ __forceinline__ typename Elem<kS>::type* staged_row() {
  return reinterpret_cast<typename Elem<kS>::type*>(sol_rms_row);
}

// Row src (h elements of kS) into shared memory.
template <int kS>
__device__ __forceinline__ void stage_row(const void* src, long long h, bool vec) {
  typedef typename Elem<kS>::type T;
  T* row = staged_row<kS>();
  const long long per_vector = 16 / sizeof(T), vectors = vec ? h / per_vector : 0;
  for (long long i = threadIdx.x; i < vectors; i += blockDim.x) sol_rms_row[i] = static_cast<const uint4*>(src)[i];
  for (long long i = vectors * per_vector + threadIdx.x; i < h; i += blockDim.x) row[i] = static_cast<const T*>(src)[i];
}

// residual = round_r(residual + x), into memory and into shared memory.
template <int kX, int kR>
__device__ __forceinline__ void stage_residual_sum(const void* x, void* residual, long long h, bool vec) {
  const int xs = sizeof(typename Elem<kX>::type), rs = sizeof(typename Elem<kR>::type);
  typename Elem<kR>::type* row = staged_row<kR>();
  const long long groups = h / 8;
  for (long long g = threadIdx.x; g < groups; g += blockDim.x) {
    float a[8], b[8], s[8];
    load8<kX>(byte_at(x, g * 8, xs), vec, a);
    load8<kR>(byte_at(residual, g * 8, rs), vec, b);
#pragma unroll
    for (int j = 0; j < 8; ++j) s[j] = add_rn(b[j], a[j]);
    store8<kR>(byte_at(residual, g * 8, rs), vec, s);
    store8<kR>(row + g * 8, true, s);
  }
  for (long long i = groups * 8 + threadIdx.x; i < h; i += blockDim.x) {
    const float s = add_rn(Elem<kR>::get(residual, i), Elem<kX>::get(x, i));
    Elem<kR>::put(residual, i, s);
    Elem<kR>::put(row, i, s);
  }
}

template <int kS>
struct StagedElement {
  const typename Elem<kS>::type* row;
  __device__ __forceinline__ float operator()(long long i) const { return Elem<kS>::get(row, i); }
};

// 1 / rms of the staged row, for every thread of the CTA.
template <int kS>
__device__ __forceinline__ float staged_inverse_rms(long long h, float eps) {
  __shared__ float partials[64];
  __shared__ float inv;
  __syncthreads();  // the row is staged
  if (threadIdx.x < 64) partials[threadIdx.x] = rms_partial(int(threadIdx.x), kS == kBF16, h, StagedElement<kS>{staged_row<kS>()});
  __syncthreads();
  if (threadIdx.x == 0) inv = rms_inverse(rms_combine(partials), h, eps);
  __syncthreads();
  return inv;
}

// y = round_y((row * inv) * w) from the staged row.
template <int kS, int kW, int kY>
__device__ __forceinline__ void write_normed(long long h, float inv, const void* w, bool w_vec, void* y, bool y_vec) {
  const int ws = sizeof(typename Elem<kW>::type), ys = sizeof(typename Elem<kY>::type);
  const typename Elem<kS>::type* row = staged_row<kS>();
  const long long groups = h / 8;
  for (long long g = threadIdx.x; g < groups; g += blockDim.x) {
    float xv[8], wv[8], out[8];
    load8<kS>(row + g * 8, true, xv);
    load8<kW>(byte_at(w, g * 8, ws), w_vec, wv);
#pragma unroll
    for (int j = 0; j < 8; ++j) out[j] = rms_apply(xv[j], inv, wv[j]);
    store8<kY>(byte_at(y, g * 8, ys), y_vec, out);
  }
  for (long long i = groups * 8 + threadIdx.x; i < h; i += blockDim.x)
    Elem<kY>::put(y, i, rms_apply(Elem<kS>::get(row, i), inv, Elem<kW>::get(w, i)));
}

// Per-token FP8 of round_bf16((row * inv) * w) from the staged row (h a multiple of the group).
template <int kS, int kW>
__device__ __forceinline__ void write_normed_fp8(long long h, float inv, const void* w, bool w_vec, long long r,
                                                 const QuantOut& out) {
  const int ws = sizeof(typename Elem<kW>::type);
  const typename Elem<kS>::type* row = staged_row<kS>();
  const long long chunks = h / 16;
  const int lane = threadIdx.x & 31;
  for (long long base = threadIdx.x - lane; base < chunks; base += blockDim.x) {
    const long long c = base + lane;
    const bool active = c < chunks;
    float v[16];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float xv[8], wv[8];
      if (active) {
        load8<kS>(row + c * 16 + half * 8, true, xv);
        load8<kW>(byte_at(w, c * 16 + half * 8, ws), w_vec, wv);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) v[half * 8 + j] = active ? round_to<kBF16>(rms_apply(xv[j], inv, wv[j])) : 0.0f;
    }
    quant16(v, active, r, c * 16, out);
  }
}

template <int kX, int kW, int kY>
__device__ __forceinline__ void rmsnorm_row(const void* x, long long x_stride, void* y, long long y_stride,
                                            const void* w, long long h, float eps, int flags) {
  const long long r = blockIdx.x;
  stage_row<kX>(byte_at(x, r * x_stride, sizeof(typename Elem<kX>::type)), h, flags & kRowsAligned);
  const float inv = staged_inverse_rms<kX>(h, eps);
  write_normed<kX, kW, kY>(h, inv, w, flags & kWeightAligned, byte_at(y, r * y_stride, sizeof(typename Elem<kY>::type)),
                           flags & kOutAligned);
}

template <int kX, int kR, int kW, int kY>
__device__ __forceinline__ void add_rmsnorm_row(const void* x, long long x_stride, void* residual, long long r_stride,
                                                void* y, long long y_stride, const void* w, long long h, float eps,
                                                int flags) {
  const long long r = blockIdx.x;
  stage_residual_sum<kX, kR>(byte_at(x, r * x_stride, sizeof(typename Elem<kX>::type)),
                             byte_at(residual, r * r_stride, sizeof(typename Elem<kR>::type)), h, flags & kRowsAligned);
  const float inv = staged_inverse_rms<kR>(h, eps);
  write_normed<kR, kW, kY>(h, inv, w, flags & kWeightAligned, byte_at(y, r * y_stride, sizeof(typename Elem<kY>::type)),
                           flags & kOutAligned);
}

template <int kX, int kW>
__device__ __forceinline__ void rmsnorm_quant_row(const void* x, long long x_stride, const void* w, long long h,
                                                  float eps, int flags, const QuantOut& out) {
  const long long r = blockIdx.x;
  stage_row<kX>(byte_at(x, r * x_stride, sizeof(typename Elem<kX>::type)), h, flags & kRowsAligned);
  const float inv = staged_inverse_rms<kX>(h, eps);
  write_normed_fp8<kX, kW>(h, inv, w, flags & kWeightAligned, r, out);
}

}  // namespace sol_cuda
