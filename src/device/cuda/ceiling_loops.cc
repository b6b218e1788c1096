// The ceiling loops on a CUDA device: src/kernels/cuda/ceilings_{memory,compute}.cuh compiled by
// the JIT, launched on the device's current stream and timed by time_device_runs.
#include <cstdint>
#include <cstring>
#include <map>
#include <vector>
#include <mutex>

#include "device/cuda/launch.h"
#include "device/cuda/ceiling_loops.h"
#include "device/gpu_ceilings.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol::cuda {

const CudaProgram& ceiling_memory_program() {
  static const CudaProgram p{"sol_ceilings_memory", "#include \"kernels/cuda/ceilings_memory.cuh\"\n", {}};
  return p;
}
const CudaProgram& ceiling_compute_program() {
  static const CudaProgram p{"sol_ceilings_compute", "#include \"kernels/cuda/ceilings_compute.cuh\"\n", {}};
  return p;
}

namespace {


// Random operands of the compute loops: FMA factors in [0.5, 1) (the chains stay finite),
// bf16 values in (-1, 1), e4m3 codes that are finite (bit 3 cleared: the exponent is never all
// ones, so never 0x7F / 0xFF, the NaNs).
constexpr size_t kMmaSeedBytes = 2 * 64 * 128 + 256 * 128;  // ceilings_compute.cuh's tiles
std::vector<unsigned char> compute_seed(bool fp8) {
  std::vector<unsigned char> bytes(kMmaSeedBytes);
  uint32_t x = 0x12345679u;
  auto next = [&] {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    return x;
  };
  if (fp8) {
    for (unsigned char& b : bytes) b = (unsigned char)(next() & 0xF7u);
    return bytes;
  }
  for (size_t i = 0; i + 1 < bytes.size(); i += 2) {
    const float v = float(int32_t(next())) / 2147483648.0f;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bytes[i] = (unsigned char)(bits >> 16), bytes[i + 1] = (unsigned char)(bits >> 24);
  }
  return bytes;
}
std::vector<float> fma_seed() {
  std::vector<float> f(72);
  for (size_t i = 0; i < f.size(); ++i) f[i] = 0.5f + 0.5f * float((i * 2654435761u) % 1000u) / 1000.f;
  for (size_t i = 32; i < 64; ++i) f[i] *= 1e-3f;  // the added terms
  return f;
}

// HBM loops run over buffers far larger than L2 (1 GiB moved per copy run), the L2 loop over
// a quarter of it, many passes per launch. Allocated at the first measurement, kept for the
// process (a paired ceiling is measured twice per bench case).
struct Scratch {
  DeviceBuffer a, b, sink, fma, bf16, fp8;
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
    std::vector<float> f = fma_seed();
    s.fma = DeviceBuffer(device, DType::f32, {int64_t(f.size())});
    transfer(Tensor(f.data(), DType::f32, {int64_t(f.size())}), s.fma);
    for (const bool fp8 : {false, true}) {
      std::vector<unsigned char> m = compute_seed(fp8);
      DeviceBuffer& dst = fp8 ? s.fp8 : s.bf16;
      dst = DeviceBuffer(device, DType::u8, {int64_t(m.size())});
      transfer(Tensor(m.data(), DType::u8, {int64_t(m.size())}), dst);
    }
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
  const CudaProgram& memory = ceiling_memory_program();
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
  const int sms = cuda_device(device.index).sm_count;
  if (name == "fma_f32") {
    // 2048 threads per SM, 2 FLOPs x 128 FFMA per trip; 2000 trips take about 2 ms.
    LaunchShape fma;
    fma.block[0] = 256;
    fma.grid[0] = unsigned(8 * sms);
    const void* seed = s.fma.device_data();
    int trips = 2000;
    float never_f = -1.5e38f;
    void* args[] = {&seed, &trips, &never_f, &sink};
    const double t = time_kernel(device, get_kernel(ceiling_compute_program(), "sol_ceiling_fma", device), fma, args, seconds);
    return 2.0 * 128 * trips * double(fma.grid[0]) * fma.block[0] / t;
  }
  if (name == "mma_bf16" || name == "mma_fp8") {
    // One CTA per SM, two warpgroups; each trip is 8 wgmma of 64 x 256 x K (K = 16 bf16 or
    // 32 fp8: 32 bytes).
    const bool fp8 = name == "mma_fp8";
    LaunchShape mma;
    mma.block[0] = 256;
    mma.grid[0] = unsigned(sms);
    const void* seed = fp8 ? s.fp8.device_data() : s.bf16.device_data();
    int trips = 2000;
    float never_f = -1.5e38f;
    void* args[] = {&seed, &trips, &never_f, &sink};
    const Kernel k = get_kernel(ceiling_compute_program(), fp8 ? "sol_ceiling_mma_e4m3" : "sol_ceiling_mma_bf16", device);
    const double t = time_kernel(device, k, mma, args, seconds);
    const double per_mma = 2.0 * 64 * 256 * (fp8 ? 32 : 16);
    return per_mma * 8 * trips * 2 * double(mma.grid[0]) / t;
  }
  fail("measure_gpu_ceiling", "no device loop for '", name, "'");
}

}  // namespace sol::cuda
