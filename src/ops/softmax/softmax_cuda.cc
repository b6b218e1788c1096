// sol::softmax's CUDA entry: src/kernels/cuda/softmax.cuh, one block per row. Within f32
// rounding of the CPU path (its sum order differs), not bit for bit.
#include <algorithm>
#include <cstdint>
#include <string>

#include "device/cuda/launch.h"
#include "ops/softmax/softmax_backends.h"
#include "sol/device.h"

namespace sol {

namespace {

const cuda::CudaProgram& softmax_program() {
  static const cuda::CudaProgram p = [] {
    cuda::CudaProgram program;
    program.name = "sol_softmax";
    program.source = "#include \"kernels/cuda/softmax.cuh\"\n";
    for (const char* in : {"false", "true"})
      for (const char* out : {"false", "true"})
        for (const char* vec : {"false", "true"})
          program.source += std::string("SOL_CUDA_SOFTMAX_KERNEL(") + in + ", " + out + ", " + vec + ")\n";
    return program;
  }();
  return p;
}

}  // namespace

void softmax_cuda(const Tensor& x, const Tensor& y) {
  if (x.numel() == 0) return;
  check(x.device_data() && y.device_data(), "softmax", "x or y has elements but no data");
  long long n = x.shape(-1), rows = x.numel() / n;
  const bool vec = n % 8 == 0 && (reinterpret_cast<uintptr_t>(x.device_data()) |
                                  reinterpret_cast<uintptr_t>(y.device_data())) % 16 == 0;
  const auto flag = [](bool b) { return b ? "true" : "false"; };
  const std::string name = std::string("sol_softmax_") + flag(x.dtype() == DType::bf16) + "_" +
                           flag(y.dtype() == DType::bf16) + "_" + flag(vec);
  const cuda::Kernel kernel = cuda::get_kernel(softmax_program(), name.c_str(), x.device());
  const void* xp = x.device_data();
  void* yp = y.device_data();
  void* args[] = {&xp, &yp, &rows, &n};
  cuda::LaunchShape shape;
  shape.block[0] = 256;  // kSoftmaxThreads
  shape.grid[0] = unsigned(std::min<long long>(rows, 16LL * cuda_device(x.device().index).sm_count));
  cuda::launch(kernel, shape, current_stream(x.device()), args);
}

}  // namespace sol
