#pragma once
// sol::gemm's route for operands on a device (gemm_device.cc).
#include "sol/gemm.h"

namespace sol {

bool gemm_on_device(const Tensor& a, const Tensor& b, const Tensor& d);
void gemm_device(const Tensor& a, const Tensor& b, const Tensor& d, const GemmOptions& opt);

}  // namespace sol
