#pragma once
// The ceiling loops on a CUDA device (CUDA backend only; callers go through gpu_ceilings.h).
#include <string_view>

#include "device/cuda/nvrtc_jit.h"
#include "sol/tensor.h"

namespace sol::cuda {

// The JIT programs of the loops (src/kernels/cuda/ceilings_memory.cuh, ceilings_compute.cuh).
const CudaProgram& ceiling_memory_program();
const CudaProgram& ceiling_compute_program();

// Raw units/s of the named ceiling (gpu_ceilings.h), about `seconds` of device time.
double measure_ceiling_loop(std::string_view name, Device device, double seconds);

}  // namespace sol::cuda
