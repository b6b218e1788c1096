#pragma once
// Pieces shared by the row kernels of the memory-bound ops (rope, softmax, routing, MoE rows,
// embedding): 16-byte vectors, grid-stride indices, f32 <-> bf16 bits (convert_math.cuh, the
// same rounding as the CPU path).
#include "kernels/cuda/convert_math.cuh"

namespace sol_cuda {

struct alignas(16) Bytes16 {
  u32 x, y, z, w;
};

__device__ __forceinline__ float bits_to_f32(u32 b) { return __uint_as_float(b); }
__device__ __forceinline__ float bf16_to_f32(u16 b) { return __uint_as_float(u32(b) << 16); }
__device__ __forceinline__ u16 f32_to_bf16(float f) { return narrow_from_f32<kBF16>(__float_as_uint(f)); }

// Element i of a row of f32 (kBf16 = false) or bf16, as f32.
template <bool kBf16>
__device__ __forceinline__ float load_elem(const void* row, long long i) {
  if (kBf16) return bf16_to_f32(static_cast<const u16*>(row)[i]);
  return static_cast<const float*>(row)[i];
}
template <bool kBf16>
__device__ __forceinline__ void store_elem(void* row, long long i, float v) {
  if (kBf16) static_cast<u16*>(row)[i] = f32_to_bf16(v);
  else static_cast<float*>(row)[i] = v;
}

// 8 consecutive elements at p (16-byte aligned) as f32: one 16-byte load for bf16, two for f32.
template <bool kBf16>
__device__ __forceinline__ void load8(const void* p, float* v) {
  const Bytes16* q = static_cast<const Bytes16*>(p);
  if (kBf16) {
    const Bytes16 a = q[0];
    const u32 w[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[2 * i] = __uint_as_float(w[i] << 16);
      v[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
    }
  } else {
    const Bytes16 a = q[0], b = q[1];
    v[0] = __uint_as_float(a.x), v[1] = __uint_as_float(a.y), v[2] = __uint_as_float(a.z), v[3] = __uint_as_float(a.w);
    v[4] = __uint_as_float(b.x), v[5] = __uint_as_float(b.y), v[6] = __uint_as_float(b.z), v[7] = __uint_as_float(b.w);
  }
}
template <bool kBf16>
__device__ __forceinline__ void store8(void* p, const float* v) {
  Bytes16* q = static_cast<Bytes16*>(p);
  if (kBf16) {
    u32 w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = u32(f32_to_bf16(v[2 * i])) | (u32(f32_to_bf16(v[2 * i + 1])) << 16);
    q[0] = Bytes16{w[0], w[1], w[2], w[3]};
  } else {
    q[0] = Bytes16{__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3])};
    q[1] = Bytes16{__float_as_uint(v[4]), __float_as_uint(v[5]), __float_as_uint(v[6]), __float_as_uint(v[7])};
  }
}

}  // namespace sol_cuda
