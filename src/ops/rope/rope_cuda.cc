// sol::rope's CUDA entry: src/kernels/cuda/rope.cuh on the table's device copy, the same bits
// as the CPU path. The positions are read back and range-checked on the host while the kernel
// runs (cuda::IndexReadback): an out-of-range position is a sol::Error from this call, and the
// kernel leaves that token as it was.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>

#include "device/cuda/index_readback.h"
#include "device/cuda/launch.h"
#include "ops/common/validate.h"
#include "ops/rope/rope_backends.h"
#include "sol/device.h"

namespace sol {

namespace {

const cuda::CudaProgram& rope_program() {
  static const cuda::CudaProgram p = [] {
    cuda::CudaProgram program;
    program.name = "sol_rope";
    program.source = "#include \"kernels/cuda/rope.cuh\"\n";
    for (const char* bf16 : {"false", "true"})
      for (const char* inter : {"false", "true"})
        for (const char* vec : {"false", "true"})
          program.source += std::string("SOL_CUDA_ROPE_KERNEL(") + bf16 + ", " + inter + ", " + vec + ")\n";
    return program;
  }();
  return p;
}

struct DeviceRopeTable {
  DeviceBuffer cos, sin;
};

// The device copy of `table` on `device`. A table is a function of its config and length, so
// copies are keyed by those (never by the host object's address, which a later table may
// reuse) and kept for the process.
const DeviceRopeTable& device_table(const RopeTable& table, Device device) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<DeviceRopeTable>> tables;
  const RopeConfig& c = table.config();
  std::ostringstream key;
  key.precision(17);
  key << device << ' ' << table.max_positions() << ' ' << c.rope_dim << ' ' << c.theta << ' ' << c.factor << ' '
      << c.original_max_position << ' ' << c.beta_fast << ' ' << c.beta_slow << ' ' << c.mscale << ' '
      << c.mscale_all_dim << ' ' << int(c.layout);
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<DeviceRopeTable>& t = tables[key.str()];
  if (!t) {
    const int64_t n = table.max_positions() * c.rope_dim;
    auto fresh = std::make_unique<DeviceRopeTable>();
    fresh->cos = DeviceBuffer(device, DType::f32, {n});
    fresh->sin = DeviceBuffer(device, DType::f32, {n});
    transfer(Tensor(const_cast<float*>(table.cos_row(0)), DType::f32, {n}), fresh->cos);
    transfer(Tensor(const_cast<float*>(table.sin_row(0)), DType::f32, {n}), fresh->sin);
    t = std::move(fresh);
  }
  return *t;
}

void launch_rope(const Tensor& x, const Tensor& positions, const RopeTable& table, int64_t rope_offset, void* stream) {
  const int64_t tokens = x.shape(0), heads = x.shape(1), d = table.config().rope_dim;
  check(heads <= INT32_MAX / d, "rope", "heads = ", heads, " too many for the device kernel");
  const DeviceRopeTable& dt = device_table(table, x.device());
  const bool bf16 = x.dtype() == DType::bf16, inter = table.config().layout == RopeLayout::interleaved;
  const int64_t es = int64_t(dtype_size(x.dtype()));
  void* slice = static_cast<char*>(x.device_data()) + rope_offset * es;
  // 16-byte units: every head's slice aligned, whole units of 8 elements per (half) slice.
  const bool vec = reinterpret_cast<uintptr_t>(slice) % 16 == 0 && (x.stride(0) * es) % 16 == 0 &&
                   (x.stride(1) * es) % 16 == 0 && (inter ? d : d / 2) % 8 == 0;
  const std::string name = std::string("sol_rope_") + (bf16 ? "true" : "false") + "_" + (inter ? "true" : "false") +
                           "_" + (vec ? "true" : "false");
  const cuda::Kernel kernel = cuda::get_kernel(rope_program(), name.c_str(), x.device());
  long long token_stride = x.stride(0), head_stride = x.stride(1), n_tokens = tokens, max_pos = table.max_positions();
  int n_heads = int(heads), dim = int(d);
  const void* pos_device = positions.device_data();
  const void* cos = dt.cos.device_data();
  const void* sin = dt.sin.device_data();
  void* args[] = {&slice, &token_stride, &head_stride, &n_heads, &pos_device, &n_tokens, &max_pos, &cos, &sin, &dim};
  cuda::LaunchShape shape;
  shape.block[0] = 256;
  shape.grid[0] = unsigned(std::min<int64_t>(tokens, 16LL * cuda_device(x.device().index).sm_count));
  cuda::launch(kernel, shape, stream, args);
}

}  // namespace

void rope_cuda(const Tensor& x, const Tensor& positions, const RopeTable& table, int64_t rope_offset) {
  void* stream = current_stream(x.device());
  cuda::IndexReadback pos("rope", positions, stream);
  if (x.numel() != 0) launch_rope(x, positions, table, rope_offset, stream);
  rope_check_positions(static_cast<const int32_t*>(pos.wait()), x.shape(0), table);
}

}  // namespace sol
