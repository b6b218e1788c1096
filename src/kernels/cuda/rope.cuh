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

// Units whose x a thread loads together before rotating any (vector kernels): each load is an
// HBM round trip, and one unit at a time per thread left too few bytes in flight to cover it.
// The half layout holds twice the elements per unit, so half as many.
template <bool kVec, bool kInterleaved> inline constexpr int kRopeBatch = kVec ? (kInterleaved ? 4 : 2) : 1;

template <bool kBf16, bool kInterleaved, bool kVec>
__device__ __forceinline__ void rope_tokens(void* x, long long token_stride, long long head_stride, int heads,
                                            const int* positions, long long tokens, long long max_positions,
                                            const float* cos_table, const float* sin_table, int d) {
  constexpr int kX = kCodeOf<kBf16>, kBatch = kRopeBatch<kVec, kInterleaved>;
  const int es = kBf16 ? 2 : 4;
  const int unit = kVec ? 8 : (kInterleaved ? 2 : 1);  // elements of the first block per unit
  const int units = (kInterleaved ? d : d / 2) / unit;
  const int work = heads * units, half = d / 2;
  for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
    const long long p = positions[t];
    if (p < 0 || p >= max_positions) continue;
    const float* c = cos_table + p * d;
    const float* s = sin_table + p * d;
    char* token = static_cast<char*>(x) + t * token_stride * es;
    // Unit w's first element, as a byte address.
    const auto unit_at = [&](int w) {
      const int h = w / units;
      return token + ((long long)h * head_stride + (w - h * units) * unit) * es;
    };
    for (int w0 = threadIdx.x; w0 < work; w0 += kBatch * blockDim.x) {
      if (kVec) {
        float a[kBatch][8], b[kBatch][8];  // b: the partner block (half layout)
        // A unit past the end loads unit w0 again (never used): no branch between the loads, so
        // all of them issue before the first result is waited for.
#pragma unroll
        for (int q = 0; q < kBatch; ++q) {
          const int w = w0 + q * blockDim.x < work ? w0 + q * blockDim.x : w0;
          load8<kX>(unit_at(w), true, a[q]);
          if (!kInterleaved) load8<kX>(unit_at(w) + half * es, true, b[q]);
        }
#pragma unroll
        for (int q = 0; q < kBatch; ++q) {
          const int w = w0 + q * blockDim.x;
          if (w >= work) continue;
          char* at = unit_at(w);
          const int e = (w % units) * unit;  // first element of the unit within the head
          float cs[8], sn[8], r[8];
          load8<kF32>(c + e, true, cs);
          load8<kF32>(s + e, true, sn);
          if (kInterleaved) {
#pragma unroll
            for (int i = 0; i < 8; ++i) r[i] = rope_rotate_elem(a[q][i], a[q][i ^ 1], cs[i], sn[i]);
            store8<kX>(at, true, r);
          } else {
            float cb[8], sb[8], rb[8];
            load8<kF32>(c + e + half, true, cb);
            load8<kF32>(s + e + half, true, sb);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
              r[i] = rope_rotate_elem(a[q][i], b[q][i], cs[i], sn[i]);
              rb[i] = rope_rotate_elem(b[q][i], a[q][i], cb[i], sb[i]);
            }
            store8<kX>(at, true, r);
            store8<kX>(at + half * es, true, rb);
          }
        }
      } else {
        char* head = unit_at(w0);
        const int e = (w0 % units) * unit;
        const int e2 = kInterleaved ? 1 : half;  // the pair's second element, from the first
        const float a = Elem<kX>::get(head, 0), b = Elem<kX>::get(head, e2);
        Elem<kX>::put(head, 0, rope_rotate_elem(a, b, c[e], s[e]));
        Elem<kX>::put(head, e2, rope_rotate_elem(b, a, c[e + e2], s[e + e2]));
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
