// Every configuration the sm90 GEMM chooser (sm90_gemm_config.h) picks for the GEMM shape table,
// instantiated for the offline tiers (cmake/SolCudaChecks.cmake: nvcc and NVRTC with warnings as
// errors, the SASS expectations of sm90_gemm_configs.sass.txt). A host test
// (Sm90GemmConfig.EveryChosenConfigurationIsInstantiatedForTheOfflineBuilds) fails when the
// chooser picks one that is not here. Symbols: sol_sm90_gemm_cfg_<kind>_<block_m>x<block_n>_s<stages>,
// kind bf16_nn for the layout-nn shapes (B [K, N] read MN-major).
#include "kernels/cuda/sm90/sm90_gemm_tile.cuh"
#include "kernels/cuda/sm90/sm90_gemm_tile_fp8.cuh"

using namespace sol::kernels::sm90;

#define SOL_GEMM_CFG(kind, bytes, bm, bn, st)                                                                 \
  extern "C" __global__ void __launch_bounds__(GemmTilePlan<bm, bn, st, bm / 64, bytes>::threads, 1)          \
      sol_sm90_gemm_cfg_##kind##_##bm##x##bn##_s##st(const __grid_constant__ TmaDescriptor map_a,             \
                                                     const __grid_constant__ TmaDescriptor map_b,             \
                                                     const __grid_constant__ TmaDescriptor map_d, u32 m, u32 n, \
                                                     u32 k) {                                                 \
    gemm_tile<GemmTilePlan<bm, bn, st, bm / 64, bytes>>(&map_a, &map_b, &map_d, m, n, k);                     \
  }

// Layout nn: B [K, N] read MN-major (bf16 only).
#define SOL_GEMM_CFG_NN(bm, bn, st)                                                                           \
  extern "C" __global__ void __launch_bounds__(GemmTilePlan<bm, bn, st, bm / 64, 2, OperandMajor::mn>::threads, 1) \
      sol_sm90_gemm_cfg_bf16_nn_##bm##x##bn##_s##st(const __grid_constant__ TmaDescriptor map_a,              \
                                                    const __grid_constant__ TmaDescriptor map_b,              \
                                                    const __grid_constant__ TmaDescriptor map_d, u32 m, u32 n, \
                                                    u32 k) {                                                  \
    gemm_tile<GemmTilePlan<bm, bn, st, bm / 64, 2, OperandMajor::mn>>(&map_a, &map_b, &map_d, m, n, k);       \
  }

#define SOL_GEMM_CFG_SCALED(bm, st)                                                                           \
  extern "C" __global__ void __launch_bounds__(GemmTilePlan<bm, 128, st, bm / 64, 1>::threads, 1)             \
      sol_sm90_gemm_cfg_e4m3_scaled_##bm##x128_s##st(                                                         \
          const __grid_constant__ TmaDescriptor map_a, const __grid_constant__ TmaDescriptor map_b,           \
          const __grid_constant__ TmaDescriptor map_d, const float* scales_a, const float* scales_b, u32 m,   \
          u32 n, u32 k) {                                                                                     \
    gemm_tile_fp8<GemmTilePlan<bm, 128, st, bm / 64, 1>>(&map_a, &map_b, &map_d, scales_a, scales_b, m, n, k); \
  }

SOL_GEMM_CFG(bf16, 2, 64, 64, 4)
SOL_GEMM_CFG(bf16, 2, 64, 64, 8)
SOL_GEMM_CFG(bf16, 2, 64, 128, 8)
SOL_GEMM_CFG(bf16, 2, 64, 256, 5)
SOL_GEMM_CFG(bf16, 2, 128, 128, 6)
SOL_GEMM_CFG(bf16, 2, 128, 256, 4)

SOL_GEMM_CFG_NN(64, 64, 4)
SOL_GEMM_CFG_NN(64, 128, 8)
SOL_GEMM_CFG_NN(128, 256, 4)

SOL_GEMM_CFG(e4m3, 1, 64, 64, 2)
SOL_GEMM_CFG(e4m3, 1, 64, 64, 4)
SOL_GEMM_CFG(e4m3, 1, 64, 64, 8)
SOL_GEMM_CFG(e4m3, 1, 64, 128, 8)
SOL_GEMM_CFG(e4m3, 1, 64, 256, 4)
SOL_GEMM_CFG(e4m3, 1, 64, 256, 5)
SOL_GEMM_CFG(e4m3, 1, 128, 64, 8)
SOL_GEMM_CFG(e4m3, 1, 128, 128, 6)
SOL_GEMM_CFG(e4m3, 1, 128, 256, 4)

SOL_GEMM_CFG_SCALED(64, 2)
SOL_GEMM_CFG_SCALED(64, 4)
SOL_GEMM_CFG_SCALED(64, 6)
SOL_GEMM_CFG_SCALED(64, 8)
SOL_GEMM_CFG_SCALED(128, 4)
SOL_GEMM_CFG_SCALED(128, 5)
