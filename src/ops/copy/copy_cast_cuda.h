#pragma once
// The CUDA program of the copy and cast families (src/kernels/cuda/copy_cast.cuh), and how a
// grid-stride elementwise kernel is sized on a device.
#include "device/cuda/launch.h"

namespace sol {

const cuda::CudaProgram& copy_cast_program();

// 256 threads per block; enough blocks for `work` items, at most 16 per SM (the grid-stride
// loop covers the rest).
cuda::LaunchShape elementwise_shape(Device device, long long work);

// True when both addresses are 16-byte aligned (the kernels' vector path).
bool vector_aligned(const Tensor& a, const Tensor& b);

}  // namespace sol
