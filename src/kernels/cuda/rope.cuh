#pragma once
// sol::rope on the device, in place: one block per token at a time (grid-stride), its threads
// over (head, unit) of the token's heads. A unit is 8 elements moved as 16-byte vectors (one
// LDG.128/STG.128 per bf16 unit, two per f32 unit; interleaved: 8 consecutive elements, 4
// whole pairs; half: 8 elements of the first half and their 8 partners d/2 on) when the host
// found every slice 16-byte aligned and the unit dividing it, else one pair per thread.
// Each element is rope_rotate_elem below: the CPU path's formula, so the bits are the CPU's.
// A token whose position is outside the table is left as it is (the host's check, made while
// the kernel runs, reports it: src/device/cuda/index_readback.h).
#include "kernels/cuda/vec_io.cuh"

namespace sol_cuda {

// x[i] with partner p: fma(p, sin, x * cos), the product rounded first (rope_scalar.cc and
// the AVX-512 kernel compute the same), on the table's signed sin.
__device__ __forceinline__ float rope_rotate_elem(float x, float partner, float c, float s) {
  return __fmaf_rn(partner, s, __fmul_rn(x, c));
}

template <bool kBf16, bool kInterleaved, bool kVec>
__device__ __forceinline__ void rope_tokens(void* x, long long token_stride, long long head_stride, int heads,
                                            const int* positions, long long tokens, long long max_positions,
                                            const float* cos_table, const float* sin_table, int d) {
  constexpr int kX = kCodeOf<kBf16>;
  const int es = kBf16 ? 2 : 4;
  const int unit = kVec ? 8 : (kInterleaved ? 2 : 1);  // elements of the first block per unit
  const int units = (kInterleaved ? d : d / 2) / unit;
  const int work = heads * units;
  for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
    const long long p = positions[t];
    if (p < 0 || p >= max_positions) continue;
    const float* c = cos_table + p * d;
    const float* s = sin_table + p * d;
    char* token = static_cast<char*>(x) + t * token_stride * es;
    for (int w = threadIdx.x; w < work; w += blockDim.x) {
      const int h = w / units, u = w - h * units;
      char* head = token + (long long)h * head_stride * es;
      const int e = u * unit;  // first element of the unit
      if (kVec) {
        float a[8], cs[8], sn[8], r[8];
        load8<kX>(head + e * es, true, a);
        load8<kF32>(c + e, true, cs);
        load8<kF32>(s + e, true, sn);
        if (kInterleaved) {
#pragma unroll
          for (int i = 0; i < 8; ++i) r[i] = rope_rotate_elem(a[i], a[i ^ 1], cs[i], sn[i]);
          store8<kX>(head + e * es, true, r);
        } else {
          const int half = d / 2;
          float b[8], cb[8], sb[8], rb[8];
          load8<kX>(head + (e + half) * es, true, b);
          load8<kF32>(c + e + half, true, cb);
          load8<kF32>(s + e + half, true, sb);
#pragma unroll
          for (int i = 0; i < 8; ++i) {
            r[i] = rope_rotate_elem(a[i], b[i], cs[i], sn[i]);
            rb[i] = rope_rotate_elem(b[i], a[i], cb[i], sb[i]);
          }
          store8<kX>(head + e * es, true, r);
          store8<kX>(head + (e + half) * es, true, rb);
        }
      } else {
        const int e2 = kInterleaved ? e + 1 : e + d / 2;  // the pair's second element
        const float a = Elem<kX>::get(head, e), b = Elem<kX>::get(head, e2);
        Elem<kX>::put(head, e, rope_rotate_elem(a, b, c[e], s[e]));
        Elem<kX>::put(head, e2, rope_rotate_elem(b, a, c[e2], s[e2]));
      }
    }
  }
}

}  // namespace sol_cuda

// sol_rope_<bf16>_<interleaved>_<vec>: x [tokens, heads, *] (strides in elements, the rope
// slice's first element at x), positions [tokens] i32, cos/sin tables [max_positions, d] f32.
#define SOL_CUDA_ROPE_KERNEL(bf16, inter, vec)                                                                  \
  extern "C" __global__ void __launch_bounds__(256) sol_rope_##bf16##_##inter##_##vec(                        \
      void* x, long long token_stride, long long head_stride, int heads, const int* positions, long long tokens, \
      long long max_positions, const float* cos_table, const float* sin_table, int d) {                      \
    sol_cuda::rope_tokens<bf16, inter, vec>(x, token_stride, head_stride, heads, positions, tokens,           \
                                            max_positions, cos_table, sin_table, d);                         \
  }
