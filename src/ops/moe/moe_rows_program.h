#pragma once
// The CUDA program of the row movers (src/kernels/cuda/moe_rows.cuh): embedding's gather,
// MoE permute and unpermute, and how their row kernels are launched.
#include <cstdint>

#include "device/cuda/launch.h"

namespace sol {

const cuda::CudaProgram& moe_rows_program();
// 256 threads per block, one row per block at a time, at most 16 blocks per SM.
cuda::LaunchShape row_blocks(Device device, int64_t rows);

}  // namespace sol
