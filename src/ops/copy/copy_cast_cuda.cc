#include "ops/copy/copy_cast_cuda.h"

#include <algorithm>
#include <cstdint>

#include "sol/device.h"

namespace sol {

const cuda::CudaProgram& copy_cast_program() {
  static const cuda::CudaProgram p = [] {
    cuda::CudaProgram program;
    program.name = "sol_copy_cast";
    program.source = "#include \"kernels/cuda/copy_cast.cuh\"\n";
    for (int from = 0; from < 5; ++from)
      for (int to = 0; to < 5; ++to)
        program.source += "SOL_CUDA_CAST_KERNEL(" + std::to_string(from) + ", " + std::to_string(to) + ")\n";
    return program;
  }();
  return p;
}

cuda::LaunchShape elementwise_shape(Device device, long long work) {
  const long long threads = 256;
  const long long most = 16LL * cuda_device(device.index).sm_count;
  cuda::LaunchShape s;
  s.block[0] = unsigned(threads);
  s.grid[0] = unsigned(std::clamp((work + threads - 1) / threads, 1LL, most));
  return s;
}

bool vector_aligned(const Tensor& a, const Tensor& b) {
  return (reinterpret_cast<uintptr_t>(a.device_data()) | reinterpret_cast<uintptr_t>(b.device_data())) % 16 == 0;
}

}  // namespace sol
