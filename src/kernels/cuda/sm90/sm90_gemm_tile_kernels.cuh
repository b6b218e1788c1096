#pragma once
// The sm90 GEMM tile kernels Sol launches (src/ops/gemm/gemm_sm90_cuda.cc) and the offline checks
// build and inspect (tests/kernels/cuda/sm90_gemm_tile_kernels.cu: nvcc and NVRTC with warnings
// as errors, the SASS expectations of sm90_gemm_tile_kernels.sass.txt). extern "C" keeps the
// symbol names plain for cuLibraryGetKernel and the SASS checks.
#include "kernels/cuda/sm90/sm90_gemm_tile.cuh"
#include "kernels/cuda/sm90/sm90_gemm_tile_fp8.cuh"

using sol::kernels::sm90::GemmBf16NnPlan128x128;
using sol::kernels::sm90::GemmBf16Plan128x128;
using sol::kernels::sm90::GemmE4m3Plan128x128;
using sol::kernels::sm90::TmaDescriptor;
using sol::kernels::sm90::u32;

extern "C" __global__ void __launch_bounds__(GemmBf16Plan128x128::threads, 1)
    sol_sm90_gemm_bf16_128x128x64_s4(const __grid_constant__ TmaDescriptor map_a,
                                     const __grid_constant__ TmaDescriptor map_b,
                                     const __grid_constant__ TmaDescriptor map_d, u32 m, u32 n, u32 k) {
  sol::kernels::sm90::gemm_tile<GemmBf16Plan128x128>(&map_a, &map_b, &map_d, m, n, k);
}

// Layout nn: B stored [K, N], read MN-major (map_b is over B [K, N]).
extern "C" __global__ void __launch_bounds__(GemmBf16NnPlan128x128::threads, 1)
    sol_sm90_gemm_bf16_nn_128x128x64_s4(const __grid_constant__ TmaDescriptor map_a,
                                        const __grid_constant__ TmaDescriptor map_b,
                                     const __grid_constant__ TmaDescriptor map_d, u32 m, u32 n, u32 k) {
  sol::kernels::sm90::gemm_tile<GemmBf16NnPlan128x128>(&map_a, &map_b, &map_d, m, n, k);
}

extern "C" __global__ void __launch_bounds__(GemmE4m3Plan128x128::threads, 1)
    sol_sm90_gemm_e4m3_128x128x128_s4(const __grid_constant__ TmaDescriptor map_a,
                                      const __grid_constant__ TmaDescriptor map_b,
                                     const __grid_constant__ TmaDescriptor map_d, u32 m, u32 n, u32 k) {
  sol::kernels::sm90::gemm_tile<GemmE4m3Plan128x128>(&map_a, &map_b, &map_d, m, n, k);
}

extern "C" __global__ void __launch_bounds__(GemmE4m3Plan128x128::threads, 1)
    sol_sm90_gemm_e4m3_scaled_128x128x128_s4(const __grid_constant__ TmaDescriptor map_a,
                                             const __grid_constant__ TmaDescriptor map_b,
                                             const __grid_constant__ TmaDescriptor map_d, const float* scales_a,
                                             const float* scales_b, u32 m, u32 n, u32 k) {
  sol::kernels::sm90::gemm_tile_fp8<GemmE4m3Plan128x128>(&map_a, &map_b, &map_d, scales_a, scales_b, m, n, k);
}
