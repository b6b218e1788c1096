#include "ops/quant/device_rows_cuda.h"

#include <cstdint>
#include <map>
#include <tuple>

#include "ops/copy/copy_cast_cuda.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

const cuda::Kernel& device_kernel(const cuda::CudaProgram& program, const std::string& name, Device device) {
  static thread_local std::map<std::tuple<std::string, std::string, int>, cuda::Kernel> loaded;
  cuda::Kernel& k = loaded[{program.name, name, device.index}];
  if (!k.function) k = cuda::get_kernel(program, name.c_str(), device);
  return k;
}

bool rows_aligned16(const Tensor& t) {
  const bool base = reinterpret_cast<uintptr_t>(t.device_data()) % 16 == 0;
  return base && (t.ndim() < 2 || t.shape(0) <= 1 || t.stride(0) * int64_t(dtype_size(t.dtype())) % 16 == 0);
}

std::string dtype_code(const Tensor& t) { return std::to_string(int(t.dtype())); }

sol_cuda::QuantOut per_token_out(const char* op, const Tensor& q, const Tensor& scales, const QuantOptions& opt) {
  const int64_t lanes = opt.group / 16;
  check(opt.group % 16 == 0 && lanes >= 1 && lanes <= 32 && (lanes & (lanes - 1)) == 0, op, "group = ", opt.group,
        " is not supported on ", q.device(), " (16, 32, 64, 128, 256 or 512)");
  sol_cuda::QuantOut out{};
  out.q = static_cast<sol_cuda::u8*>(q.device_data());
  out.q_stride = q.ndim() == 2 ? q.stride(0) : 0;
  out.scales = static_cast<float*>(scales.device_data());
  out.scale_stride0 = scales.stride(0);
  out.scale_stride1 = scales.stride(1);
  out.group_lanes = int(lanes);
  out.ue8m0 = opt.scale == ScaleFormat::ue8m0;
  out.vec_q = rows_aligned16(q);
  return out;
}

void launch_grid_stride(const cuda::Kernel& kernel, Device device, long long items, void** args) {
  cuda::launch(kernel, elementwise_shape(device, items), current_stream(device), args);
}

}  // namespace sol
