#pragma once
// Host-side helpers of the row ops' CUDA entries (quantization, norms, activations): loading
// their kernels, which views the kernels may read with 16-byte vectors, and where per-token
// FP8 codes and scales go. Included only by *_cuda.cc files (builds with the CUDA backend).
#include <string>

#include "device/cuda/launch.h"
#include "kernels/cuda/fp8_quant_math.cuh"
#include "sol/quant.h"
#include "sol/tensor.h"

namespace sol {

// The row ops' programs (src/kernels/cuda/*_kernels.cuh), one per family.
const cuda::CudaProgram& quant_program();
const cuda::CudaProgram& rmsnorm_program();
const cuda::CudaProgram& activation_program();

// The kernel `name` of `program` on `device`, looked up once per thread (compiled or read from
// the JIT's disk cache at its first use in the process).
const cuda::Kernel& device_kernel(const cuda::CudaProgram& program, const std::string& name, Device device);

// Whether every row of a 2-d view starts on a 16-byte boundary (its address and its row stride).
bool rows_aligned16(const Tensor& t);

// The DType code the kernels' names carry ("0" f32, "1" bf16).
std::string dtype_code(const Tensor& t);

// Per-token codes q [rows, h] and scales [rows, h / group]; sol::Error naming `op` when the
// group is not one the device kernels take (16 * 2^k up to 512: a group's threads are lanes of
// one warp).
sol_cuda::QuantOut per_token_out(const char* op, const Tensor& q, const Tensor& scales, const QuantOptions& opt);

// Launches `kernel` over `items` grid-stride work items (256-thread blocks) on the current stream
// of `device`.
void launch_grid_stride(const cuda::Kernel& kernel, Device device, long long items, void** args);

}  // namespace sol
