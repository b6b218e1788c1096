// sol::cast's CUDA entry: one kernel per (from, to) pair, bit-identical to the CPU path
// (src/kernels/cuda/convert_math.cuh).
#include <array>
#include <string>

#include "ops/common/validate.h"
#include "ops/copy/copy_cast_cuda.h"
#include "ops/copy/copy_table.h"
#include "sol/device.h"

namespace sol {

void cast_cuda(const Tensor& src, const Tensor& dst) {
  if (src.empty()) return;
  check(src.device_data() && dst.device_data(), "cast", "src or dst has elements but no data");
  require_no_overlap("cast", "src", src, "dst", dst);
  const int from = int(src.dtype()), to = int(dst.dtype());  // kernels are numbered as DType
  static thread_local std::array<cuda::Kernel, 25> kernels;
  cuda::Kernel& kernel = kernels[size_t(from * 5 + to)];
  if (!kernel.function || kernel.device != src.device()) {
    const std::string name = "sol_cast_" + std::to_string(from) + "_" + std::to_string(to);
    kernel = cuda::get_kernel(copy_cast_program(), name.c_str(), src.device());
  }
  const void* s = src.device_data();
  void* d = dst.device_data();
  long long n = src.numel();
  int vectors = vector_aligned(src, dst) ? 1 : 0;
  const long long lanes = 16 / std::min(dtype_size(src.dtype()), dtype_size(dst.dtype()));
  void* args[] = {&s, &d, &n, &vectors};
  cuda::launch(kernel, elementwise_shape(src.device(), vectors ? n / lanes + 1 : n), current_stream(src.device()),
               args);
}

}  // namespace sol
