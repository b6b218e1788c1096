// Instantiations of the persistent sm90 GEMM (sm90_gemm_persistent.cuh) for the offline checks
// (cmake/SolCudaChecks.cmake: nvcc and NVRTC with warnings as errors, the SASS expectations of
// sm90_gemm_persistent_kernels.sass.txt). One kernel serves one GEMM and both grouped layouts
// (the grouping is an argument); the split-K reduction is its own kernel.
#include "kernels/cuda/sm90/sm90_gemm_persistent.cuh"

using namespace sol::kernels::sm90;

#define SOL_PERSISTENT(name, bm, bn, st, bytes, scaled)                                                        \
  extern "C" __global__ void __launch_bounds__(GemmTilePlan<bm, bn, st, bm / 64, bytes>::threads, 1) name(      \
      const __grid_constant__ TmaDescriptor map_a, const __grid_constant__ TmaDescriptor map_b,                \
      const __grid_constant__ PersistentGemmArgs args) {                                                       \
    using Plan = GemmTilePlan<bm, bn, st, bm / 64, bytes>;                                                     \
    gemm_persistent<Plan, GemmTileScheduler<bm, bn>, scaled>(&map_a, &map_b, args);                            \
  }

SOL_PERSISTENT(sol_sm90_gemm_persistent_bf16_128x256_s4, 128, 256, 4, 2, false)
SOL_PERSISTENT(sol_sm90_gemm_persistent_bf16_64x128_s8, 64, 128, 8, 2, false)
SOL_PERSISTENT(sol_sm90_gemm_persistent_e4m3_128x256_s4, 128, 256, 4, 1, false)
SOL_PERSISTENT(sol_sm90_gemm_persistent_e4m3_scaled_128x128_s6, 128, 128, 6, 1, true)

extern "C" __global__ void sol_sm90_gemm_split_reduce(const __grid_constant__ PersistentGemmArgs args) {
  gemm_split_reduce<GemmTileScheduler<128, 128>>(args);
}
