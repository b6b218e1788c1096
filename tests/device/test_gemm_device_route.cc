// sol::gemm given device tensors routes to the sm90 kernels (gemm_device.cc): the epilogue
// (alpha, beta with C, bias, silu, f32 D) and bf16 layout nn go there, what they do not implement yet is a clear
// error naming it, and nothing falls back to the host. The addresses
// are never valid host memory, so a host read would crash the test.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "sol/device.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "ops/error_message.h"

namespace sol {
namespace {

Tensor on_device(uintptr_t address, DType t, std::initializer_list<int64_t> shape) {
  return Tensor(reinterpret_cast<void*>(address), t, shape).on(Device::cuda(0));
}

// What a call throws, as text (tests/ops/error_message.h).
std::string error_of(const std::function<void()>& f) { return testing_errors::message_of(f); }

struct Operands {
  Tensor a = on_device(0x1000, DType::bf16, {64, 128});
  Tensor b = on_device(0x9000, DType::bf16, {256, 128});
  Tensor d = on_device(0x30000, DType::bf16, {64, 256});
};

TEST(GemmDeviceRoute, UnsupportedOptionsAreNamed) {
  Operands o;
  const Tensor a8 = on_device(0x1000, DType::f8e4m3, {64, 128}), b8 = on_device(0x9000, DType::f8e4m3, {128, 256});
  EXPECT_NE(error_of([&] { gemm(a8, b8, o.d); }).find("an f8e4m3 b must be stored [N, K] (layout nt): fp8 wgmma reads "
                                                      "K-major operands only"),
            std::string::npos);
  GemmOptions nt;
  nt.layout = Layout::nt;
  EXPECT_NE(error_of([&] { gemm(o.a, b8, o.d, nt); }).find("bf16 x f8e4m3 (weight-only fp8) is not on the device"),
            std::string::npos);
}

TEST(GemmDeviceRoute, MixedDevicesAreNamed) {
  Operands o;
  GemmOptions nt;
  nt.layout = Layout::nt;
  Tensor host_d(reinterpret_cast<void*>(0x30000), DType::bf16, {64, 256});
  EXPECT_NE(error_of([&] { gemm(o.a, o.b, host_d, nt); }).find("must share one device"), std::string::npos);
}

// The supported cases (the epilogue's forms and f32 D among them) reach the persistent sm90
// launcher, which needs a device (here: discovery's reason), never the CPU kernels; its argument
// checks, the epilogue's operands included, are GemmSm90PersistentPlan's tests.
TEST(GemmDeviceRoute, SupportedOptionsReachTheSm90Launcher) {
  if (!cuda_discovery().devices.empty()) GTEST_SKIP() << "a device exists: the gpu tests run the launch";
  Operands o;
  const Tensor c = on_device(0x60000, DType::bf16, {64, 256}), bias = on_device(0x70000, DType::f32, {256});
  const Tensor d32 = on_device(0x80000, DType::f32, {64, 256});
  GemmOptions nt, full;
  nt.layout = full.layout = Layout::nt;
  full.alpha = 0.5f, full.beta = 2.0f, full.c = &c, full.bias = &bias, full.activation = Activation::silu;
  using Call = std::pair<const Tensor*, GemmOptions>;
  for (const auto& [d, opt] : std::initializer_list<Call>{{&o.d, nt}, {&o.d, full}, {&d32, nt}}) {
    const std::string e = error_of([&] { gemm(o.a, o.b, *d, opt); });
    EXPECT_NE(e.find(cuda_discovery().reason), std::string::npos) << e;
    EXPECT_EQ(e.find("cpu only"), std::string::npos) << e;
  }
  // Layout nn (the default) with bf16: B [K, N] goes to the same launcher, epilogue and all.
  const Tensor b_kn = on_device(0x9000, DType::bf16, {128, 256});
  GemmOptions nn = full;
  nn.layout = Layout::nn;
  for (const GemmOptions& opt : {GemmOptions{}, nn}) {
    const std::string e = error_of([&] { gemm(o.a, b_kn, o.d, opt); });
    EXPECT_NE(e.find(cuda_discovery().reason), std::string::npos) << e;
  }
}

TEST(GemmDeviceRoute, GroupedGemmsRouteToTheDevice) {
  if (!cuda_discovery().devices.empty()) GTEST_SKIP() << "a device exists: the gpu tests run the launch";
  const Tensor a = on_device(0x100000, DType::bf16, {256, 128}), b = on_device(0x200000, DType::bf16, {2, 64, 128});
  const Tensor layout = on_device(0x300000, DType::i32, {256}), d = on_device(0x400000, DType::bf16, {256, 64});
  const std::string c = error_of([&] { grouped_gemm_contiguous(a, b, layout, d); });
  EXPECT_NE(c.find("grouped_gemm_contiguous"), std::string::npos) << c;
  EXPECT_NE(c.find(cuda_discovery().reason), std::string::npos) << c;
  const Tensor am = on_device(0x100000, DType::bf16, {2, 128, 128}), masked = on_device(0x300000, DType::i32, {2});
  const Tensor dm = on_device(0x400000, DType::bf16, {2, 128, 64});
  const std::string m = error_of([&] { grouped_gemm_masked(am, b, masked, dm); });
  EXPECT_NE(m.find("grouped_gemm_masked"), std::string::npos) << m;
  EXPECT_NE(m.find(cuda_discovery().reason), std::string::npos) << m;
}

}  // namespace
}  // namespace sol
