// Device tensors on the host: a tensor on cuda:N carries its device through views, CPU ops
// reject it before touching its memory, and ops given operands on two devices say so. The
// device address used here is never valid host memory: a host read would crash the test.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "sol/copy.h"
#include "sol/device.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "sol/norm.h"
#include "sol/tensor.h"
#include "ops/error_message.h"

namespace sol {
namespace {

// Addresses no host page maps (Linux never maps below vm.mmap_min_addr, 64 KiB by default).
void* unmapped(uintptr_t offset = 0) { return reinterpret_cast<void*>(uintptr_t{0x200} + offset); }

// What a call throws, as text (tests/ops/error_message.h).
std::string error_of(const std::function<void()>& f) { return testing_errors::message_of(f); }

TEST(DeviceTensor, DefaultsToCpuAndKeepsDeviceThroughViews) {
  float host[12];
  Tensor t(host, DType::f32, {3, 4});
  EXPECT_EQ(t.device(), Device::cpu());
  const Tensor d = Tensor(unmapped(), DType::f32, {3, 4}).on(Device::cuda(1));
  EXPECT_EQ(d.device(), Device::cuda(1));
  EXPECT_EQ(d.slice(0, 1, 2).device(), Device::cuda(1));
  EXPECT_EQ(d.reshape({12}).device(), Device::cuda(1));
  EXPECT_EQ(d.device().name(), "cuda:1");
  EXPECT_EQ(d.describe(), "[3, 4] f32 on cuda:1");
  EXPECT_EQ(d.device_data(), unmapped());
}

TEST(DeviceTensor, HostAccessToDeviceMemoryThrows) {
  const Tensor d = Tensor(unmapped(), DType::bf16, {8}).on(Device::cuda(0));
  const std::string e = error_of([&] { (void)d.data(); });
  EXPECT_NE(e.find("lives on cuda:0"), std::string::npos) << e;
  EXPECT_THROW((void)d.data_as<uint16_t>(), Error);
  EXPECT_THROW((void)d.ptr({3}), Error);
}

TEST(DeviceTensor, CpuOpRejectsDeviceTensor) {
  const Tensor x = Tensor(unmapped(), DType::f32, {4, 64}).on(Device::cuda(0));
  const Tensor w = Tensor(unmapped(0x1000), DType::f32, {64}).on(Device::cuda(0));
  const Tensor y = Tensor(unmapped(0x2000), DType::f32, {4, 64}).on(Device::cuda(0));
  // layernorm (CPU only) names the argument before any row is read, on every ISA path.
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    setenv("SOL_ISA", isa, 1);
    const std::string e = error_of([&] { layernorm(x, w, nullptr, y); });
    EXPECT_NE(e.find("layernorm: x is on cuda:0 but this op runs on the cpu only"), std::string::npos) << isa << ": " << e;
  }
  unsetenv("SOL_ISA");
  // Ops that validate with require_data name themselves and the argument.
  const Tensor b = Tensor(unmapped(0x1000), DType::f32, {8, 8}).on(Device::cuda(0));
  const std::string g = error_of([&] { pack_b(b, Layout::nt); });
  EXPECT_NE(g.find("pack_b: "), std::string::npos) << g;
  EXPECT_NE(g.find("is on cuda:0 but this op runs on the cpu only"), std::string::npos) << g;
}

TEST(DeviceTensor, MixedDevicesAreAnError) {
  std::vector<float> host(16);
  const Tensor h(host.data(), DType::f32, {16});
  const Tensor d = Tensor(unmapped(), DType::f32, {16}).on(Device::cuda(0));
  std::vector<uint16_t> host16(16);
  const std::string e = error_of([&] { copy(h, d); });
  EXPECT_NE(e.find("copy: src is on cpu but dst is on cuda:0"), std::string::npos) << e;
  const std::string c = error_of([&] { cast(d, Tensor(host16.data(), DType::bf16, {16})); });
  EXPECT_NE(c.find("cast: src is on cuda:0 but dst is on cpu"), std::string::npos) << c;
  const Tensor d1 = Tensor(unmapped(), DType::f32, {16}).on(Device::cuda(1));
  EXPECT_NE(error_of([&] { copy(d, d1); }).find("src is on cuda:0 but dst is on cuda:1"), std::string::npos);
}

TEST(DeviceTensor, DeviceOpWithoutDeviceSaysWhy) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device exists; the gpu tests cover it";
  const Tensor a = Tensor(unmapped(), DType::f32, {16}).on(Device::cuda(0));
  const Tensor b = Tensor(unmapped(0x1000), DType::f32, {16}).on(Device::cuda(0));
  const std::string e = error_of([&] { copy(a, b); });
  EXPECT_NE(e.find(cuda_discovery().reason), std::string::npos) << e;
  EXPECT_NE(error_of([&] { cast(a, b); }).find(cuda_discovery().reason), std::string::npos);
  EXPECT_THROW(DeviceBuffer(Device::cuda(0), 64), Error);
  EXPECT_THROW(Stream{Device::cuda(0)}, Error);
}

TEST(DeviceTensor, TransferBetweenHostTensorsCopies) {
  std::vector<float> a = {1, 2, 3, 4}, b(4, -1);
  transfer(Tensor(a.data(), DType::f32, {4}), Tensor(b.data(), DType::f32, {4}));
  EXPECT_EQ(a, b);
  EXPECT_THROW(transfer(Tensor(a.data(), DType::f32, {4}), Tensor(b.data(), DType::f32, {2, 2})), Error);
}

}  // namespace
}  // namespace sol
