// sol::gemm given device tensors routes to the sm90 kernels (gemm_device.cc): what they do not
// implement yet is a clear error naming it, and nothing falls back to the host. The addresses
// are never valid host memory, so a host read would crash the test.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "sol/device.h"
#include "sol/error.h"
#include "sol/gemm.h"

namespace sol {
namespace {

Tensor on_device(uintptr_t address, DType t, std::initializer_list<int64_t> shape) {
  return Tensor(reinterpret_cast<void*>(address), t, shape).on(Device::cuda(0));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

struct Operands {
  Tensor a = on_device(0x1000, DType::bf16, {64, 128});
  Tensor b = on_device(0x9000, DType::bf16, {256, 128});
  Tensor d = on_device(0x30000, DType::bf16, {64, 256});
};

TEST(GemmDeviceRoute, UnsupportedOptionsAreNamed) {
  Operands o;
  GemmOptions nt;
  nt.layout = Layout::nt;
  EXPECT_NE(error_of([&] { gemm(o.a, o.b, o.d); }).find("layout nn is not on the device"), std::string::npos);
  GemmOptions beta = nt;
  beta.beta = 1.0f;
  EXPECT_NE(error_of([&] { gemm(o.a, o.b, o.d, beta); }).find("alpha/beta/c are not supported"), std::string::npos);
  GemmOptions silu = nt;
  silu.activation = Activation::silu;
  EXPECT_NE(error_of([&] { gemm(o.a, o.b, o.d, silu); }).find("bias and activation"), std::string::npos);
  const Tensor d32 = on_device(0x30000, DType::f32, {64, 256});
  EXPECT_NE(error_of([&] { gemm(o.a, o.b, d32, nt); }).find("d must be bf16"), std::string::npos);
}

TEST(GemmDeviceRoute, MixedDevicesAreNamed) {
  Operands o;
  GemmOptions nt;
  nt.layout = Layout::nt;
  Tensor host_d(reinterpret_cast<void*>(0x30000), DType::bf16, {64, 256});
  EXPECT_NE(error_of([&] { gemm(o.a, o.b, host_d, nt); }).find("must share one device"), std::string::npos);
}

// The supported case reaches the sm90 launcher: its shape checks run, then the launch needs a
// device (here: discovery's reason), never the CPU kernels.
TEST(GemmDeviceRoute, SupportedOptionsReachTheSm90Launcher) {
  Operands o;
  GemmOptions nt;
  nt.layout = Layout::nt;
  const Tensor bad_d = on_device(0x30000, DType::bf16, {64, 250});
  EXPECT_NE(error_of([&] { gemm(o.a, o.b, bad_d, nt); }).find("gemm_sm90"), std::string::npos);
  if (!cuda_discovery().devices.empty()) GTEST_SKIP() << "a device exists: the gpu tests run the launch";
  const std::string e = error_of([&] { gemm(o.a, o.b, o.d, nt); });
  EXPECT_NE(e.find(cuda_discovery().reason), std::string::npos) << e;
}

}  // namespace
}  // namespace sol
