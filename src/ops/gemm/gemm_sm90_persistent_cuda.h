#pragma once
// The JIT program of one persistent sm90 GEMM configuration (CUDA backend only): what
// gemm_sm90_persistent loads, and what the host test compiles for sm_90a without a GPU.
#include "device/cuda/nvrtc_jit.h"
#include "ops/gemm/gemm_sm90_persistent.h"

namespace sol {

// Named after the plan's kernel (the JIT keys loaded programs by name: one per configuration);
// holds that kernel and the split-K reduction.
cuda::CudaProgram sm90_persistent_program(const Sm90PersistentPlan& plan);

}  // namespace sol
