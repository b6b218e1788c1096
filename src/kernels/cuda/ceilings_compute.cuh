#pragma once
// Compute ceiling loops of `sol hw` on a GPU (src/device/cuda/ceiling_loops.cc), on random data
// the host writes into `seed`, with results folded into one value that is stored only when it
// equals `never`, so no work can be dropped and nothing is written.
//   sol_ceiling_fma:  8 independent FFMA chains per thread (FFMA's latency, 4 cycles, hidden
//                     by 8 chains times a full SM of warps), 128 FFMAs per loop trip.
//   sol_ceiling_mma_bf16 / _e4m3: two warpgroups per CTA (one CTA per SM), each issuing eight
//                     dense m64n256 wgmma per commit group from 128-byte-swizzled K-major tiles
//                     in shared memory (A 64 x 64 per warpgroup, B 256 x 64 shared), as a GEMM's
//                     main loop does without its loads: the tensor cores' peak.
#include "kernels/cuda/sm90/sm90_descriptor.h"
#include "kernels/cuda/sm90/sm90_wgmma.cuh"

namespace sol_ceiling {

using namespace sol::kernels::sm90;

constexpr int kFmaChains = 8, kFmaUnroll = 16;
constexpr u32 kTileK = 128;  // bytes of K per tile row: one 128-byte swizzle row
constexpr u32 kARows = 64, kBRows = 256, kWarpgroups = 2;
constexpr u32 kABytes = kARows * kTileK, kBBytes = kBRows * kTileK;
constexpr u32 kMmaPerGroup = 8;  // two passes over the tile's four 32-byte K steps

// One warpgroup's loop: `iterations` commit groups of kMmaPerGroup wgmma into one accumulator.
template <bool kFp8>
__device__ __forceinline__ float mma_loop(const u8* a, const u8* b, int iterations) {
  Accum<256> acc;
#pragma unroll
  for (u32 i = 0; i < 128; ++i) acc.d[i] = 0.f;
  const u64 desc_a = kmajor_desc(smem_address(a), Swizzle::b128);
  const u64 desc_b = kmajor_desc(smem_address(b), Swizzle::b128);
  for (int it = 0; it < iterations; ++it) {
    wgmma_fence();
#pragma unroll
    for (u32 k = 0; k < kMmaPerGroup; ++k) {
      const u32 step = (k % 4) * 32;  // bytes along K inside the swizzled row
      if constexpr (kFp8)
        wgmma_e4m3<256>(acc, advance_smem_desc(desc_a, step), advance_smem_desc(desc_b, step), 1);
      else
        wgmma_bf16<256>(acc, advance_smem_desc(desc_a, step), advance_smem_desc(desc_b, step), 1);
    }
    wgmma_commit();
    wgmma_wait<0>();
  }
  fence_accumulator(acc);
  float s = 0.f;
#pragma unroll
  for (u32 i = 0; i < 128; ++i) s += acc.d[i];
  return s;
}

// Copies the random operands into shared memory (their order there does not matter: any bytes
// are random bytes), then runs the loop on each warpgroup.
template <bool kFp8>
__device__ __forceinline__ void mma_ceiling(const uint4* __restrict__ seed, int iterations, float never,
                                            float* __restrict__ sink) {
  __shared__ __align__(1024) u8 tiles[kWarpgroups * kABytes + kBBytes];
  uint4* t = reinterpret_cast<uint4*>(tiles);
  for (u32 i = threadIdx.x; i < sizeof tiles / 16; i += blockDim.x) t[i] = seed[i];
  fence_proxy_async_shared();  // the wgmma reads shared memory through the async proxy
  __syncthreads();
  const u32 wg = warpgroup_index();
  const float s = mma_loop<kFp8>(tiles + wg * kABytes, tiles + kWarpgroups * kABytes, iterations);
  if (s == never) *sink = s;
}

}  // namespace sol_ceiling

extern "C" __global__ void __launch_bounds__(256) sol_ceiling_fma(const float* __restrict__ seed, int iterations,
                                                                   float never, float* __restrict__ sink) {
  using namespace sol_ceiling;
  const float x = seed[threadIdx.x % 32], y = seed[32 + threadIdx.x % 32];
  float a[kFmaChains];
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) a[j] = seed[64 + j];
  for (int i = 0; i < iterations; ++i) {
#pragma unroll
    for (int u = 0; u < kFmaUnroll; ++u) {
#pragma unroll
      for (int j = 0; j < kFmaChains; ++j) a[j] = fmaf(a[j], x, y);
    }
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < kFmaChains; ++j) s += a[j];
  if (s == never) *sink = s;
}

extern "C" __global__ void __launch_bounds__(256, 1) sol_ceiling_mma_bf16(const uint4* __restrict__ seed, int iterations,
                                                                          float never, float* __restrict__ sink) {
  sol_ceiling::mma_ceiling<false>(seed, iterations, never, sink);
}

extern "C" __global__ void __launch_bounds__(256, 1) sol_ceiling_mma_e4m3(const uint4* __restrict__ seed, int iterations,
                                                                          float never, float* __restrict__ sink) {
  sol_ceiling::mma_ceiling<true>(seed, iterations, never, sink);
}
