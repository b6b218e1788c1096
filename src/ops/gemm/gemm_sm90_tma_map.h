#pragma once
// A planned TMA box (sm90_tma_rules.h) as the driver's tensor map, for the sm90 GEMM launchers
// (CUDA backend only).
#include <cuda.h>

#include "device/cuda/driver.h"
#include "kernels/cuda/sm90/sm90_tma_rules.h"

namespace sol {

// f32 and bf16 as themselves, fp8 as bytes (TMA only moves them). Rows and K past the tensor are filled with
// zeros (OOB_FILL_NONE), which the kernels' edge handling relies on. sol::Error naming `op` and
// the operand when the driver refuses.
CUtensorMap encode_tensor_map(const cuda::Driver& d, const kernels::sm90::TmaBox& t, const char* op,
                              const char* operand);

}  // namespace sol
