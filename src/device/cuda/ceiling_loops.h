#pragma once
// The ceiling loops on a CUDA device (CUDA backend only; callers go through gpu_ceilings.h).
#include <string_view>

#include "sol/tensor.h"

namespace sol::cuda {

// Raw units/s of the named ceiling (gpu_ceilings.h), about `seconds` of device time.
double measure_ceiling_loop(std::string_view name, Device device, double seconds);

}  // namespace sol::cuda
