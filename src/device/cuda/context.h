#pragma once
// Each device's primary context (the one the CUDA runtime and torch share), retained on first
// use and kept for the life of the process: releasing it at exit would race static destructors
// of anything still holding device memory, and the driver frees it with the process anyway.
#include <cuda.h>

#include "device/cuda/driver.h"
#include "sol/tensor.h"

namespace sol::cuda {

// Checks that `device` is an existing CUDA device (sol::Error naming `who` otherwise), makes
// its primary context current on the calling thread, and returns the driver table.
const Driver& use_device(Device device, const char* who);

}  // namespace sol::cuda
