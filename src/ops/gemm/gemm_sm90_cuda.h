#pragma once
// The JIT program of the sm90 GEMM tile kernels (CUDA backend only): what gemm_sm90 loads, and
// what the host test compiles for sm_90a without a GPU.
#include "device/cuda/nvrtc_jit.h"

namespace sol {

const cuda::CudaProgram& sm90_gemm_program();

}  // namespace sol
