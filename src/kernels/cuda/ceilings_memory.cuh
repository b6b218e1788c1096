#pragma once
// Memory ceiling loops of `sol hw` and `sol bench` on a GPU (src/device/cuda/ceiling_loops.cc):
// every thread moves 16-byte vectors (LDG.E.128 / STG.E.128) over a grid-stride loop, four
// vectors in flight per thread, so the memory system is the only limit. The read loop folds
// what it loaded into one word and stores it only when it equals `never` (a value the host
// picks so that it does not happen): the loads cannot be dropped, and nothing is written.
// On a buffer larger than L2 they measure HBM; on one that fits, with `passes` > 1, L2.

namespace sol_ceiling {

struct alignas(16) V16 {
  unsigned x, y, z, w;
};

__device__ __forceinline__ long long first() { return (long long)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ long long stride() { return (long long)gridDim.x * blockDim.x; }

}  // namespace sol_ceiling

// `vectors` 16-byte vectors of src, read `passes` times.
extern "C" __global__ void sol_ceiling_read(const sol_ceiling::V16* __restrict__ src, long long vectors, int passes,
                                            unsigned never, unsigned* __restrict__ sink) {
  using namespace sol_ceiling;
  unsigned acc = 0;
  const long long step = stride();
  for (int p = 0; p < passes; ++p) {
    long long i = first();
    for (; i + 3 * step < vectors; i += 4 * step) {
      const V16 a = src[i], b = src[i + step], c = src[i + 2 * step], d = src[i + 3 * step];
      acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < vectors; i += step) {
      const V16 a = src[i];
      acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    acc += unsigned(p);  // each pass's loads stay live
  }
  if (acc == never) *sink = acc;
}

extern "C" __global__ void sol_ceiling_copy(const sol_ceiling::V16* __restrict__ src, sol_ceiling::V16* __restrict__ dst,
                                            long long vectors) {
  using namespace sol_ceiling;
  const long long step = stride();
  long long i = first();
  for (; i + 3 * step < vectors; i += 4 * step) {
    const V16 a = src[i], b = src[i + step], c = src[i + 2 * step], d = src[i + 3 * step];
    dst[i] = a;
    dst[i + step] = b;
    dst[i + 2 * step] = c;
    dst[i + 3 * step] = d;
  }
  for (; i < vectors; i += step) dst[i] = src[i];
}

extern "C" __global__ void sol_ceiling_write(sol_ceiling::V16* __restrict__ dst, long long vectors, unsigned value) {
  using namespace sol_ceiling;
  const V16 v = {value, value + 1, value + 2, value + 3};
  for (long long i = first(); i < vectors; i += stride()) dst[i] = v;
}
