// The row ops with a CUDA entry (rmsnorm family, FP8 quantization, activations) on device
// tensors, checked on the host: validation runs before any launch, so operands on two devices,
// unsupported dtypes and groups the device kernels do not take are sol::Errors here too, and a
// valid call on a machine without a device says why. Device addresses here are never valid host
// memory: a host read would crash the test.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "sol/activation.h"
#include "sol/device.h"
#include "sol/error.h"
#include "sol/norm.h"
#include "sol/quant.h"
#include "ops/error_message.h"

namespace sol {
namespace {

Tensor on_device(uintptr_t offset, DType t, std::initializer_list<int64_t> shape, int index = 0) {
  return Tensor(reinterpret_cast<void*>(uintptr_t{0x1000} + offset), t, shape).on(Device::cuda(index));
}

// What a call throws, as text (tests/ops/error_message.h).
std::string error_of(const std::function<void()>& f) { return testing_errors::message_of(f); }

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(DeviceRowOps, MixedDevicesAreAnError) {
  std::vector<float> host(4 * 256);
  const Tensor hx(host.data(), DType::f32, {4, 256});
  const Tensor x = on_device(0, DType::f32, {4, 256}), y = on_device(0x10000, DType::f32, {4, 256});
  const Tensor w = on_device(0x20000, DType::f32, {256}), w1 = on_device(0x20000, DType::f32, {256}, 1);
  const Tensor q = on_device(0x30000, DType::f8e4m3, {4, 256}), s = on_device(0x40000, DType::f32, {4, 2});
  const Tensor hs(host.data(), DType::f32, {4, 2});
  std::string e = error_of([&] { rmsnorm(x, w1, y); });
  EXPECT_TRUE(has(e, "rmsnorm: weight is on cuda:1 but y is on cuda:0")) << e;
  e = error_of([&] { rmsnorm(hx, w, y); });
  EXPECT_TRUE(has(e, "rmsnorm: ")) << e;
  EXPECT_TRUE(has(e, "is on cpu but")) << e;
  e = error_of([&] { add_rmsnorm(x, hx, w, y); });
  EXPECT_TRUE(has(e, "add_rmsnorm: ") && has(e, "cpu")) << e;
  e = error_of([&] { rmsnorm_quant_fp8(x, w, q, hs); });
  EXPECT_TRUE(has(e, "rmsnorm_quant_fp8: q is on cuda:0 but scales is on cpu")) << e;
  e = error_of([&] { quant_fp8_per_token(x, q, hs); });
  EXPECT_TRUE(has(e, "quant_fp8_per_token: ") && has(e, "cpu")) << e;
  e = error_of([&] { quant_fp8_per_block(hx, q, s); });
  EXPECT_TRUE(has(e, "quant_fp8_per_block: ") && has(e, "cpu")) << e;
  const Tensor gu = on_device(0, DType::bf16, {4, 512});
  std::vector<uint16_t> host16(4 * 256);
  e = error_of([&] { silu_mul(gu, Tensor(host16.data(), DType::bf16, {4, 256})); });
  EXPECT_TRUE(has(e, "silu_mul: gate_up is on cuda:0 but y is on cpu")) << e;
  e = error_of([&] { silu_mul_quant_fp8(gu, q, hs); });
  EXPECT_TRUE(has(e, "silu_mul_quant_fp8: ") && has(e, "cpu")) << e;
  e = error_of([&] { gelu(x, hx); });
  EXPECT_TRUE(has(e, "gelu: x is on cuda:0 but y is on cpu")) << e;
  e = error_of([&] { gelu_quant_fp8(x, q, hs); });
  EXPECT_TRUE(has(e, "gelu_quant_fp8: ") && has(e, "cpu")) << e;
}

TEST(DeviceRowOps, UnsupportedDtypesAndGroupsAreErrors) {
  const Tensor x16 = on_device(0, DType::f16, {4, 256}), y = on_device(0x10000, DType::f32, {4, 256});
  const Tensor w = on_device(0x20000, DType::f32, {256});
  const Tensor q = on_device(0x30000, DType::f8e4m3, {4, 192 * 2}), x = on_device(0x40000, DType::bf16, {4, 384});
  const Tensor s = on_device(0x50000, DType::f32, {4, 2});
  EXPECT_TRUE(has(error_of([&] { rmsnorm(x16, w, y); }), "x.dtype = f16 but must be f32 or bf16"));
  EXPECT_TRUE(has(error_of([&] { quant_fp8_per_token(x, on_device(0x30000, DType::bf16, {4, 384}), s, {192}); }),
                  "q.dtype = bf16 but must be f8e4m3"));
  // Group 192 is valid on the cpu, not on the device (a group's threads are lanes of one warp).
  const std::string e = error_of([&] { quant_fp8_per_token(x, q, s, {192}); });
  EXPECT_TRUE(has(e, "quant_fp8_per_token: group = 192 is not supported on cuda:0")) << e;
  const std::string g = error_of([&] { gelu_quant_fp8(x, q, s, GeluForm::tanh, {192}); });
  EXPECT_TRUE(has(g, "gelu_quant_fp8: group = 192 is not supported on cuda:0")) << g;
  const std::string r = error_of([&] { rmsnorm_quant_fp8(x, on_device(0x20000, DType::bf16, {384}), q, s, {}, {192}); });
  EXPECT_TRUE(has(r, "rmsnorm_quant_fp8: group = 192 is not supported on cuda:0")) << r;
  // gelu in place on the device needs one dtype (threads would overwrite inputs of others).
  const Tensor xf = on_device(0x60000, DType::f32, {4, 256});
  const Tensor xb = on_device(0x60000, DType::bf16, {4, 256});
  EXPECT_TRUE(has(error_of([&] { gelu(xf, xb); }), "gelu: ")) << error_of([&] { gelu(xf, xb); });
}

TEST(DeviceRowOps, ValidCallWithoutDeviceSaysWhy) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device exists; the gpu tests cover it";
  const Tensor x = on_device(0, DType::bf16, {4, 256}), y = on_device(0x10000, DType::bf16, {4, 256});
  const Tensor w = on_device(0x20000, DType::bf16, {256});
  const Tensor q = on_device(0x30000, DType::f8e4m3, {4, 256}), s = on_device(0x40000, DType::f32, {4, 2});
  const std::string why = cuda_discovery().reason;
  EXPECT_TRUE(has(error_of([&] { rmsnorm(x, w, y); }), why));
  EXPECT_TRUE(has(error_of([&] { quant_fp8_per_token(x, q, s); }), why));
  EXPECT_TRUE(has(error_of([&] { gelu(x, y); }), why));
}

}  // namespace
}  // namespace sol
