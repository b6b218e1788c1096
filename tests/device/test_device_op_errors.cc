// The memory-bound ops with device operands, on a machine without a device: every check that
// reads no element runs before any transfer or launch, so operands on two devices, unsupported
// dtypes and configurations the device path lacks are sol::Errors naming the op and the
// argument here too. The device addresses are never valid host memory: a host read would crash.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "sol/embedding.h"
#include "sol/error.h"
#include "sol/moe_permute.h"
#include "sol/rope.h"
#include "sol/routing.h"
#include "sol/softmax.h"
#include "sol/tensor.h"
#include "ops/error_message.h"

namespace sol {
namespace {

void* unmapped(uintptr_t offset = 0) { return reinterpret_cast<void*>(uintptr_t{0x200} + offset); }
Tensor on_device(uintptr_t offset, DType t, std::initializer_list<int64_t> shape) {
  return Tensor(unmapped(offset), t, shape).on(Device::cuda(0));
}

// What a call throws, as text (tests/ops/error_message.h).
std::string error_of(const std::function<void()>& f) { return testing_errors::message_of(f); }

void expect_error(const std::function<void()>& f, const std::string& part) {
  const std::string e = error_of(f);
  EXPECT_NE(e.find(part), std::string::npos) << "expected \"" << part << "\" in: " << e;
}

TEST(DeviceOpErrors, RopeMixedDevicesAndDtype) {
  const RopeTable table(RopeConfig{}, 16);
  std::vector<int32_t> pos(4);
  const Tensor x = on_device(0, DType::f32, {4, 2, 64});
  expect_error([&] { rope(x, Tensor(pos.data(), DType::i32, {4}), table); },
               "rope: x is on cuda:0 but positions is on cpu");
  expect_error([&] { rope(on_device(0, DType::f16, {4, 2, 64}), on_device(0x1000, DType::i32, {4}), table); },
               "rope: x.dtype = f16 but must be f32 or bf16");
}

TEST(DeviceOpErrors, SoftmaxMixedDevicesAndDtype) {
  std::vector<float> y(64);
  expect_error([&] { softmax(on_device(0, DType::f32, {2, 32}), Tensor(y.data(), DType::f32, {2, 32})); },
               "softmax: x is on cuda:0 but y is on cpu");
  expect_error([&] { softmax(on_device(0, DType::i32, {2, 32}), on_device(0x1000, DType::i32, {2, 32})); },
               "softmax: x.dtype = i32 but must be f32 or bf16");
}

TEST(DeviceOpErrors, RoutingMixedDevicesDtypeAndDeviceLimits) {
  std::vector<float> w(16);
  const Tensor logits = on_device(0, DType::f32, {2, 256}), idx = on_device(0x1000, DType::i32, {2, 8}),
               wt = on_device(0x2000, DType::f32, {2, 8});
  std::vector<float> host_bias(256);
  const Tensor bias(host_bias.data(), DType::f32, {256});
  RoutingOptions v3 = deepseek_v3_routing(&bias);
  expect_error([&] { moe_routing(logits, idx, Tensor(w.data(), DType::f32, {2, 8}), v3); },
               "moe_routing: logits is on cuda:0 but topk_weights is on cpu");
  expect_error([&] { moe_routing(logits, idx, wt, v3); }, "moe_routing: logits is on cuda:0 but correction_bias is on cpu");
  expect_error([&] { moe_routing(on_device(0, DType::f16, {2, 256}), idx, wt); }, "logits must be [tokens, experts] f32 or bf16");
#ifdef SOL_HAS_CUDA
  RoutingOptions softmax_scored;
  softmax_scored.scoring = Scoring::softmax;
  expect_error([&] { moe_routing(logits, idx, wt, softmax_scored); },
               "moe_routing: scoring = softmax is not supported on cuda:0");
  RoutingOptions wide;
  wide.top_k = 8;
  expect_error([&] { moe_routing(on_device(0, DType::f32, {2, 512}), idx, wt, wide); },
               "logits.shape[1] = 512 experts but cuda:0 supports at most 256");
#endif
}

TEST(DeviceOpErrors, MoeRowsMixedDevicesAndDtype) {
  std::vector<int32_t> host_idx(8);
  const Tensor x = on_device(0, DType::bf16, {4, 16}), perm = on_device(0x1000, DType::bf16, {8, 16}),
               layout = on_device(0x2000, DType::i32, {8}), row_of = on_device(0x3000, DType::i32, {4, 2});
  expect_error([&] { moe_permute(x, Tensor(host_idx.data(), DType::i32, {4, 2}), 4, 1, perm, layout, row_of); },
               "moe_permute: topk_idx is on cpu but x is on cuda:0");
  std::vector<float> host_w(8);
  expect_error([&] { moe_unpermute(perm, row_of, Tensor(host_w.data(), DType::f32, {4, 2}), x); },
               "moe_unpermute: row_of is on cuda:0 but topk_weights is on cpu");
  expect_error([&] { moe_unpermute(on_device(0x1000, DType::f16, {8, 16}), row_of, on_device(0x4000, DType::f32, {4, 2}), x); },
               "moe_unpermute: y_perm = ");
}

TEST(DeviceOpErrors, EmbeddingMixedDevicesAndShape) {
  std::vector<int32_t> ids(3);
  const Tensor table = on_device(0, DType::bf16, {10, 8}), out = on_device(0x1000, DType::bf16, {3, 8});
  expect_error([&] { embedding(table, Tensor(ids.data(), DType::i32, {3}), out); },
               "embedding: table is on cuda:0 but ids is on cpu");
  expect_error([&] { embedding(table, on_device(0x2000, DType::i32, {3}), on_device(0x1000, DType::f32, {3, 8})); },
               "embedding: out = ");
}

}  // namespace
}  // namespace sol
