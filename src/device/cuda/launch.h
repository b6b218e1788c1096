#pragma once
// Loading JIT-compiled kernels (cuLibraryLoadData, once per program and device) and launching
// them with cuLaunchKernelEx: thread-block clusters, and dynamic shared memory above the 48 KiB
// default (the kernel's limit is raised first, as the driver requires).
#include <cuda.h>

#include <array>
#include <cstddef>
#include <string>

#include "device/cuda/nvrtc_jit.h"
#include "sol/tensor.h"

namespace sol::cuda {

struct LaunchShape {
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
  std::array<unsigned, 3> cluster{1, 1, 1};  // all 1: no cluster attribute
  size_t dynamic_shared_bytes = 0;
};

// A kernel of a program, compiled for and loaded on one device.
struct Kernel {
  CUfunction function = nullptr;
  Device device{};
  std::string name;
};

// The kernel `kernel_name` (extern "C") of `program` on `device`; the program is compiled (or
// read from the disk cache) and loaded at its first use on that device, then kept.
Kernel get_kernel(const CudaProgram& program, const char* kernel_name, Device device);

// Launches on `stream` (a CUstream of the kernel's device); args as cuLaunchKernel takes them.
// A launch error is a sol::Error naming the kernel and its shape.
void launch(const Kernel& kernel, const LaunchShape& shape, void* stream, void** args);

}  // namespace sol::cuda
