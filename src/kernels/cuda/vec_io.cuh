#pragma once
// Device-side loads and stores of 8 f32/bf16 elements (as f32) and 16 e4m3 codes: 16-byte
// vectors (LDG.E.128 / STG.E.128) when the caller's `vec` says the address is 16-byte aligned,
// element by element otherwise (a view at an odd offset). Also the grid-stride helpers. Every
// row kernel (norms, quant, activations, rope, softmax, routing, MoE rows) moves its elements
// through these, so a bf16 store rounds the same way (cvt.rn) in all of them.
#include "kernels/cuda/float_ops.cuh"

namespace sol_cuda {

__device__ __forceinline__ long long global_thread() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ long long global_threads() { return (long long)gridDim.x * blockDim.x; }

// The element code of a kernel's `bf16, else f32` template flag.
template <bool kBf16> inline constexpr int kCodeOf = kBf16 ? kBF16 : kF32;

template <int kCode> struct Elem;
template <> struct Elem<kF32> {
  typedef float type;
  static __device__ __forceinline__ float get(const void* p, long long i) { return static_cast<const float*>(p)[i]; }
  static __device__ __forceinline__ void put(void* p, long long i, float v) { static_cast<float*>(p)[i] = v; }
};
template <> struct Elem<kBF16> {
  typedef u16 type;
  static __device__ __forceinline__ float get(const void* p, long long i) {
    return bf16_to_float(static_cast<const u16*>(p)[i]);
  }
  static __device__ __forceinline__ void put(void* p, long long i, float v) { static_cast<u16*>(p)[i] = bf16_of(v); }
};

// f32 of element v rounded to kCode's precision (the value a store then a load would give).
template <int kCode> __device__ __forceinline__ float round_to(float v) { return v; }
template <> __device__ __forceinline__ float round_to<kBF16>(float v) { return bf16_to_float(bf16_of(v)); }

// 8 elements as loaded (16-byte vectors: one for bf16, two for f32), and their f32 values: a
// kernel that wants several loads in flight loads them all raw, then widens, so no use of one
// load's value stands between it and the next load.
template <int kCode> struct Raw8 {
  static constexpr int kVectors = kCode == kBF16 ? 1 : 2;
  uint4 w[kVectors];
};
template <int kCode>
__device__ __forceinline__ void load8_raw(const void* p, Raw8<kCode>& r) {
#pragma unroll
  for (int i = 0; i < Raw8<kCode>::kVectors; ++i) r.w[i] = static_cast<const uint4*>(p)[i];
}
template <int kCode>
__device__ __forceinline__ void widen8(const Raw8<kCode>& r, float (&v)[8]) {
  if constexpr (kCode == kBF16) {
    const u32 words[4] = {r.w[0].x, r.w[0].y, r.w[0].z, r.w[0].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[2 * j] = float_of(words[j] << 16);
      v[2 * j + 1] = float_of(words[j] & 0xffff0000u);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      v[4 * i] = float_of(r.w[i].x), v[4 * i + 1] = float_of(r.w[i].y);
      v[4 * i + 2] = float_of(r.w[i].z), v[4 * i + 3] = float_of(r.w[i].w);
    }
  }
}

// Elements p[0..8) as f32.
template <int kCode>
__device__ __forceinline__ void load8(const void* p, bool vec, float (&v)[8]) {
  if (!vec) {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = Elem<kCode>::get(p, j);
    return;
  }
  if (kCode == kBF16) {
    Raw8<kBF16> r;
    r.w[0] = *static_cast<const uint4*>(p);
    widen8<kBF16>(r, v);
  } else {
    const float4 a = static_cast<const float4*>(p)[0], b = static_cast<const float4*>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  }
}

// p[0..8) = v rounded to kCode.
template <int kCode>
__device__ __forceinline__ void store8(void* p, bool vec, const float (&v)[8]) {
  if (!vec) {
#pragma unroll
    for (int j = 0; j < 8; ++j) Elem<kCode>::put(p, j, v[j]);
    return;
  }
  if (kCode == kBF16) {
    *static_cast<uint4*>(p) = make_uint4(bf16x2_of(v[0], v[1]), bf16x2_of(v[2], v[3]), bf16x2_of(v[4], v[5]),
                                         bf16x2_of(v[6], v[7]));
  } else {
    static_cast<float4*>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    static_cast<float4*>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
  }
}

// 16 codes, packed four to a word (byte j of word k is code 4 k + j).
__device__ __forceinline__ void store_codes16(u8* p, bool vec, const u32 (&c)[4]) {
  if (vec) {
    *reinterpret_cast<uint4*>(p) = make_uint4(c[0], c[1], c[2], c[3]);
    return;
  }
#pragma unroll
  for (int j = 0; j < 16; ++j) p[j] = u8(c[j / 4] >> (8 * (j % 4)));
}

__device__ __forceinline__ const char* byte_at(const void* base, long long element, int element_bytes) {
  return static_cast<const char*>(base) + element * element_bytes;
}
__device__ __forceinline__ char* byte_at(void* base, long long element, int element_bytes) {
  return static_cast<char*>(base) + element * element_bytes;
}

}  // namespace sol_cuda
