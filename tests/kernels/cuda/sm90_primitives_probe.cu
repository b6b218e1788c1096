// Kernels that use every sm90 primitive the GEMM tile kernels do not: 3D TMA loads, 2D and 3D
// TMA stores, the wgmma shapes other than N = 128, so that ptxas checks their PTX and the SASS
// checks (sm90_primitives_probe.sass.txt) see the instructions they must become. Not meant to
// be launched for results.
#include "kernels/cuda/sm90/sm90_mbarrier.cuh"
#include "kernels/cuda/sm90/sm90_tma.cuh"
#include "kernels/cuda/sm90/sm90_wgmma.cuh"

using namespace sol::kernels::sm90;

// Loads a 2D and a 3D box, adds one to every byte, stores both back through TMA.
extern "C" __global__ void __launch_bounds__(128, 1)
    sol_sm90_probe_tma(const __grid_constant__ TmaDescriptor in2, const __grid_constant__ TmaDescriptor in3,
                       const __grid_constant__ TmaDescriptor out2, const __grid_constant__ TmaDescriptor out3) {
  __shared__ __align__(1024) u8 tile[8192];
  __shared__ __align__(8) u64 bar;
  const u32 b = smem_address(&bar), t = smem_address(tile);
  if (threadIdx.x == 0) {
    mbar_init(b, 1);
    mbar_fence_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mbar_arrive_expect_tx(b, sizeof tile);
    tma_load_2d(&in2, b, t, int(blockIdx.x) * 64, 0);
    tma_load_3d(&in3, b, t + 4096, 0, int(blockIdx.x), 0);
  }
  mbar_wait(b, 0);
  for (u32 i = threadIdx.x; i < sizeof tile; i += blockDim.x) tile[i] = u8(tile[i] + 1);
  fence_proxy_async_shared();
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_store_2d(&out2, t, int(blockIdx.x) * 64, 0);
    tma_store_3d(&out3, t + 4096, 0, int(blockIdx.x), 0);
    tma_store_commit();
    tma_store_wait_read<0>();
  }
}

template <u32 N>
__device__ void store_accum(const Accum<N>& acc, float* out) {
#pragma unroll
  for (u32 i = 0; i < N / 2; ++i) out[(blockIdx.x * 128 + threadIdx.x) * (N / 2) + i] = acc.d[i];
}

template <u32 N, bool Fp8>
__device__ void probe_wgmma(u64 desc_a, u64 desc_b, float* out) {
  Accum<N> acc;
  wgmma_fence();
  if constexpr (Fp8)
    wgmma_e4m3<N>(acc, desc_a, desc_b, 0);
  else
    wgmma_bf16<N>(acc, desc_a, desc_b, 0);
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulator(acc);
  store_accum(acc, out);
}

extern "C" __global__ void __launch_bounds__(128, 1) sol_sm90_probe_wgmma_bf16_n64(u64 a, u64 b, float* out) {
  probe_wgmma<64, false>(a, b, out);
}
extern "C" __global__ void __launch_bounds__(128, 1) sol_sm90_probe_wgmma_bf16_n256(u64 a, u64 b, float* out) {
  probe_wgmma<256, false>(a, b, out);
}
extern "C" __global__ void __launch_bounds__(128, 1) sol_sm90_probe_wgmma_e4m3_n64(u64 a, u64 b, float* out) {
  probe_wgmma<64, true>(a, b, out);
}
extern "C" __global__ void __launch_bounds__(128, 1) sol_sm90_probe_wgmma_e4m3_n256(u64 a, u64 b, float* out) {
  probe_wgmma<256, true>(a, b, out);
}
