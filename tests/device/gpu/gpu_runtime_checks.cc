// The CUDA runtime on a device: discovery, memory round trips, events, and a JIT-compiled
// kernel launched with a thread-block cluster and more than 48 KiB of dynamic shared memory.
#include <cmath>
#include <cstring>
#include <vector>

#include "device/cuda/launch.h"
#include "gpu_test.h"
#include "sol/copy.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

SOL_GPU_TEST(discovery) {
  const CudaDeviceInfo& d = cuda_device(0);
  std::printf("cuda:0 %s, sm_%d%d (%s), %d SMs, %.1f GiB, L2 %.1f MiB, driver %d\n", d.name.c_str(), d.cc_major,
              d.cc_minor, d.arch().c_str(), d.sm_count, double(d.memory_bytes) / (1 << 30),
              double(d.l2_bytes) / (1 << 20), cuda_discovery().driver_version);
  SOL_EXPECT(d.sm_count > 0);
  SOL_EXPECT(d.memory_bytes > 0);
  SOL_EXPECT(d.cc_major >= 5);
  SOL_EXPECT(!d.name.empty());
}

SOL_GPU_TEST(alloc_copy_round_trip) {
  for (int64_t n : {1, 7, 4096, 1000003}) {
    std::vector<uint8_t> host(static_cast<size_t>(n)), back(static_cast<size_t>(n), 0xFF);
    for (int64_t i = 0; i < n; ++i) host[size_t(i)] = uint8_t(i * 131 + 7);
    DeviceBuffer a(Device::cuda(0), DType::u8, {n}), b(Device::cuda(0), DType::u8, {n});
    SOL_EXPECT(a.tensor().device() == Device::cuda(0));
    transfer(Tensor(host.data(), DType::u8, {n}), a);
    transfer(a, b);
    transfer(b, Tensor(back.data(), DType::u8, {n}));
    SOL_EXPECT(host == back, "n = ", n);
  }
  bool threw = false;
  try {
    DeviceBuffer(Device::cuda(cuda_device_count()), 16);
  } catch (const Error&) {
    threw = true;
  }
  SOL_EXPECT(threw, "a device index past the last must throw");
}

const cuda::CudaProgram& cluster_program() {
  static const cuda::CudaProgram p{
      "sol_gpu_test_cluster",
      "extern \"C\" __global__ void fill(float* out, int words) {\n"
      "  extern __shared__ float smem[];\n"
      "  for (int i = threadIdx.x; i < words; i += blockDim.x) smem[i] = float(i) + blockIdx.x;\n"
      "  __syncthreads();\n"
      "  unsigned rank;\n"
      "  asm volatile(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(rank));\n"
      "  float sum = 0;\n"
      "  for (int i = threadIdx.x; i < words; i += blockDim.x) sum += smem[words - 1 - i];\n"
      "  if (threadIdx.x == 0) out[blockIdx.x] = smem[words - 1] + 1000.0f * rank;\n"
      "  out[gridDim.x + blockIdx.x * blockDim.x + threadIdx.x] = sum;\n"
      "}\n",
      {}};
  return p;
}

SOL_GPU_TEST(jit_launch_cluster_and_large_shared) {
  const int blocks = 4, threads = 128, words = 100 * 1024 / 4;  // 100 KiB of shared memory
  const cuda::Kernel k = cuda::get_kernel(cluster_program(), "fill", Device::cuda(0));
  DeviceBuffer out(Device::cuda(0), DType::f32, {blocks + blocks * threads});
  cuda::LaunchShape shape;
  shape.grid = {blocks, 1, 1};
  shape.block = {threads, 1, 1};
  shape.cluster = {2, 1, 1};
  shape.dynamic_shared_bytes = size_t(words) * 4;
  void* p = out.device_data();
  int w = words;
  void* args[] = {&p, &w};
  cuda::launch(k, shape, current_stream(Device::cuda(0)), args);
  std::vector<float> host(size_t(blocks + blocks * threads));
  transfer(out, Tensor(host.data(), DType::f32, {int64_t(host.size())}));
  for (int b = 0; b < blocks; ++b)
    SOL_EXPECT(host[size_t(b)] == float(words - 1) + b + 1000.0f * (b % 2), "block ", b, " got ", host[size_t(b)]);
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t) {
      double want = 0;
      for (int i = t; i < words; i += threads) want += float(words - 1 - i) + b;
      const float got = host[size_t(blocks + b * threads + t)];
      SOL_EXPECT(std::abs(got - want) <= 1e-6 * want + 1, "block ", b, " thread ", t);
    }
}

SOL_GPU_TEST(events_time_a_copy) {
  const int64_t n = 64 << 20;
  DeviceBuffer a(Device::cuda(0), DType::u8, {n}), b(Device::cuda(0), DType::u8, {n});
  Event start(Device::cuda(0)), stop(Device::cuda(0));
  start.record();
  copy(a, b);
  stop.record();
  stop.synchronize();
  const double s = elapsed_seconds(start, stop);
  std::printf("64 MiB device copy: %.1f us (%.0f GB/s)\n", s * 1e6, 2.0 * double(n) / s / 1e9);
  SOL_EXPECT(s > 0 && s < 1.0, "elapsed ", s);
  Stream own(Device::cuda(0));
  start.record(own.handle());
  stop.record(own.handle());
  own.synchronize();
  SOL_EXPECT(elapsed_seconds(start, stop) >= 0);
}

}  // namespace sol
