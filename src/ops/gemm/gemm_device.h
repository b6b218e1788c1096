#pragma once
// sol::gemm's route for operands on a device (gemm_device.cc).
#include "kernels/cuda/sm90/sm90_gemm_scheduler.h"
#include "sol/gemm.h"

namespace sol {

bool gemm_on_device(const Tensor& a, const Tensor& b, const Tensor& d);
void gemm_device(const Tensor& a, const Tensor& b, const Tensor& d, const GemmOptions& opt);

// The grouped GEMMs' route (a plain B [G, N, K]; PackedMatrix experts are host-only).
bool grouped_on_device(const Tensor& a, const Tensor& b, const Tensor& d);
void grouped_gemm_device(kernels::sm90::GemmGrouping grouping, const Tensor& a, const Tensor& b,
                         const Tensor& group_info, const Tensor& d, const GroupedGemmOptions& opt, const char* op);

}  // namespace sol
