// The ceiling loops on a CUDA device: src/kernels/cuda/ceilings_memory.cuh compiled by the JIT,
// launched on the device's current stream and timed by time_device_runs.
#include <map>
#include <vector>
#include <mutex>

#include "device/cuda/launch.h"
#include "hw/gpu_ceiling_loops.h"
#include "hw/gpu_ceilings.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol::cuda {

namespace {

const CudaProgram& memory_program() {
  static const CudaProgram p{"sol_ceilings_memory", "#include \"kernels/cuda/ceilings_memory.cuh\"\n", {}};
  return p;
}

// HBM loops run over buffers far larger than L2 (1 GiB moved per copy run), the L2 loop over
// a quarter of it, many passes per launch. Allocated at the first measurement, kept for the
// process (a paired ceiling is measured twice per bench case).
struct Scratch {
  DeviceBuffer a, b, sink;
};
Scratch& scratch(Device device) {
  static std::mutex mu;
  static std::map<int, Scratch>* all = new std::map<int, Scratch>;
  std::lock_guard<std::mutex> lock(mu);
  Scratch& s = (*all)[device.index];
  if (!s.a.bytes()) {
    const int64_t bytes = int64_t(512) << 20;
    s.a = DeviceBuffer(device, DType::u8, {bytes});
    s.b = DeviceBuffer(device, DType::u8, {bytes});
    s.sink = DeviceBuffer(device, DType::u8, {256});
    std::vector<unsigned char> pattern(static_cast<size_t>(bytes));  // random-looking, so no compression helps
    for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = (unsigned char)((i * 2654435761u) >> 17);
    transfer(Tensor(pattern.data(), DType::u8, {bytes}), s.a);
  }
  return s;
}

LaunchShape full_occupancy(Device device) {
  // 1024 threads per SM: 64 registers each fit in the register file, and four 16-byte vectors
  // in flight per thread cover HBM's bandwidth-latency product several times over.
  LaunchShape shape;
  shape.block[0] = 256;
  shape.grid[0] = unsigned(4 * cuda_device(device.index).sm_count);
  return shape;
}

double time_kernel(Device device, const Kernel& k, const LaunchShape& shape, void** args, double seconds) {
  void* stream = current_stream(device);
  TimingOptions opt;
  opt.min_seconds = seconds;
  opt.min_runs = 5;
  opt.warmup_seconds = seconds / 4;
  return time_device_runs(device, [&](int) { launch(k, shape, stream, args); }, opt).median_s;
}

}  // namespace

double measure_ceiling_loop(std::string_view name, Device device, double seconds) {
  Scratch& s = scratch(device);
  const LaunchShape shape = full_occupancy(device);
  const CudaProgram& memory = memory_program();
  const void* a = s.a.device_data();
  void* b = s.b.device_data();
  void* sink = s.sink.device_data();
  long long vectors = (long long)(s.a.bytes() / 16);
  unsigned never = 0x9E3779B9u;
  if (name == "hbm_read" || name == "l2_read") {
    const bool l2 = name == "l2_read";
    // L2: a quarter of it, so the two partitions of Hopper's L2 each hold their half of it.
    if (l2) vectors = (long long)(cuda_device(device.index).l2_bytes / 4 / 16);
    int passes = l2 ? 64 : 1;
    void* args[] = {&a, &vectors, &passes, &never, &sink};
    const double t = time_kernel(device, get_kernel(memory, "sol_ceiling_read", device), shape, args, seconds);
    return double(passes) * double(vectors) * 16 / t;
  }
  if (name == "hbm_copy") {
    void* args[] = {&a, &b, &vectors};
    const double t = time_kernel(device, get_kernel(memory, "sol_ceiling_copy", device), shape, args, seconds);
    return 2 * double(vectors) * 16 / t;
  }
  if (name == "hbm_write") {
    void* args[] = {&b, &vectors, &never};
    const double t = time_kernel(device, get_kernel(memory, "sol_ceiling_write", device), shape, args, seconds);
    return double(vectors) * 16 / t;
  }
  fail("measure_gpu_ceiling", "no device loop for '", name, "' yet");
}

}  // namespace sol::cuda
