// The host side of the sm90 GEMM tile launch (ops/gemm/gemm_sm90.h), without a GPU: which kernel,
// the TMA boxes (through sm90_tma_rules.h), grid, block and shared memory for odd shapes, and a
// clear sol::Error for every argument the kernels cannot take. Device tensors here are views of
// addresses that are never dereferenced.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "ops/error_message.h"
#include "ops/gemm/gemm_sm90.h"
#include "sol/device.h"

namespace sol {
namespace {

using kernels::sm90::GemmBf16Plan128x128;
using kernels::sm90::GemmE4m3Plan128x128;
using kernels::sm90::Swizzle;
using testing_errors::message_of;

constexpr std::uintptr_t kBase = 0x7f0000000000;

Tensor on_device(std::uintptr_t address, DType dtype, std::initializer_list<int64_t> shape, int device = 0) {
  return Tensor(reinterpret_cast<void*>(address), dtype, shape).on(Device::cuda(device));
}

TEST(Sm90GemmLaunch, Bf16OddShape) {
  const Tensor a = on_device(kBase, DType::bf16, {131, 200}), b = on_device(kBase + (1 << 20), DType::bf16, {136, 200});
  const Tensor d = on_device(kBase + (2 << 20), DType::bf16, {131, 136});
  const Sm90GemmLaunch p = plan_gemm_sm90(a, b, d);
  EXPECT_STREQ(p.kernel, "sol_sm90_gemm_bf16_128x128x64_s4");
  EXPECT_EQ(p.launch.grid[0], 2u);  // 136 columns: two 128-wide tiles
  EXPECT_EQ(p.launch.grid[1], 2u);  // 131 rows
  EXPECT_EQ(p.launch.grid[2], 1u);
  EXPECT_EQ(p.launch.block[0], 384u);  // producer + two consumer warpgroups
  EXPECT_EQ(p.launch.cluster[0] * p.launch.cluster[1] * p.launch.cluster[2], 1u);
  EXPECT_EQ(p.launch.dynamic_shared_bytes, GemmBf16Plan128x128::smem_bytes);
  EXPECT_GT(p.launch.dynamic_shared_bytes, 48u * 1024);  // needs the opt-in limit the launcher raises
  EXPECT_EQ(p.launch.a.global_address, kBase);
  EXPECT_EQ(p.launch.a.dims[0], 200u);
  EXPECT_EQ(p.launch.a.dims[1], 131u);
  EXPECT_EQ(p.launch.a.strides_bytes[1], 400u);
  EXPECT_EQ(p.launch.a.box[0], 64u);  // one 128-byte swizzled row of K
  EXPECT_EQ(p.launch.a.box[1], 128u);
  EXPECT_EQ(p.launch.b.global_address, kBase + (1 << 20));
  EXPECT_EQ(p.launch.b.dims[1], 136u);
  EXPECT_EQ(p.launch.b.swizzle, Swizzle::b128);
}

// Layout nn: B [k, n] (any row stride) as MN-major boxes of 64 columns by one K block of rows;
// fp8 with nn is refused (fp8 wgmma reads K-major operands only).
TEST(Sm90GemmLaunch, Bf16LayoutNn) {
  const Tensor a = on_device(kBase, DType::bf16, {131, 200});
  const Tensor b = on_device(kBase + (1 << 20), DType::bf16, {200, 256}).slice(1, 0, 136);  // rows 512 bytes apart
  const Tensor d = on_device(kBase + (2 << 20), DType::bf16, {131, 136});
  const Sm90GemmLaunch p = plan_gemm_sm90(a, b, d, nullptr, nullptr, Layout::nn);
  EXPECT_STREQ(p.kernel, "sol_sm90_gemm_bf16_nn_128x128x64_s4");
  EXPECT_EQ(p.launch.grid[0], 2u);
  EXPECT_EQ(p.launch.grid[1], 2u);
  EXPECT_EQ(p.launch.dynamic_shared_bytes, kernels::sm90::GemmBf16NnPlan128x128::smem_bytes);
  EXPECT_EQ(p.launch.b.dims[0], 136u);  // N innermost
  EXPECT_EQ(p.launch.b.dims[1], 200u);
  EXPECT_EQ(p.launch.b.strides_bytes[1], 512u);
  EXPECT_EQ(p.launch.b.box[0], 64u);
  EXPECT_EQ(p.launch.b.box[1], 64u);
  EXPECT_EQ(p.launch.b.swizzle, Swizzle::b128);
  EXPECT_EQ(p.launch.a.dims[0], 200u);
  EXPECT_NE(message_of([&] { plan_gemm_sm90(a, on_device(kBase, DType::bf16, {136, 200}), d, nullptr, nullptr, Layout::nn); })
                .find("b.shape = [136, 200] but must be [200, 200]"),
            std::string::npos);
  const Tensor a8 = on_device(kBase, DType::f8e4m3, {64, 256}), b8 = on_device(kBase, DType::f8e4m3, {256, 128});
  EXPECT_NE(message_of([&] { plan_gemm_sm90(a8, b8, on_device(kBase, DType::bf16, {64, 128}), nullptr, nullptr, Layout::nn); })
                .find("fp8 wgmma reads K-major operands only"),
            std::string::npos);
}

TEST(Sm90GemmLaunch, Fp8ScaledAndRowStrides) {
  const Tensor wide = on_device(kBase, DType::f8e4m3, {77, 512});
  const Tensor a = wide.slice(1, 0, 384);  // rows 512 bytes apart
  const Tensor b = on_device(kBase + (1 << 20), DType::f8e4m3, {264, 384});
  const Tensor d = on_device(kBase + (2 << 20), DType::bf16, {77, 264});
  const Tensor sa = on_device(kBase + (3 << 20), DType::f32, {77, 3});
  const Tensor sb = on_device(kBase + (4 << 20), DType::f32, {3, 3});
  const Sm90GemmLaunch p = plan_gemm_sm90(a, b, d, &sa, &sb);
  EXPECT_STREQ(p.kernel, "sol_sm90_gemm_e4m3_scaled_128x128x128_s4");
  EXPECT_EQ(p.launch.grid[0], 3u);
  EXPECT_EQ(p.launch.grid[1], 1u);
  EXPECT_EQ(p.launch.a.strides_bytes[1], 512u);
  EXPECT_EQ(p.launch.a.element_bytes, 1u);
  EXPECT_EQ(p.launch.a.box[0], 128u);
  EXPECT_EQ(p.launch.dynamic_shared_bytes, GemmE4m3Plan128x128::smem_bytes);
  EXPECT_STREQ(plan_gemm_sm90(a, b, d).kernel, "sol_sm90_gemm_e4m3_128x128x128_s4");
  EXPECT_EQ(plan_gemm_sm90(on_device(kBase, DType::f8e4m3, {0, 384}), b, on_device(kBase, DType::bf16, {0, 264})).kernel,
            nullptr);  // nothing to launch
}

TEST(Sm90GemmLaunch, BadArgumentsAreNamed) {
  const Tensor a = on_device(kBase, DType::bf16, {64, 256}), b = on_device(kBase, DType::bf16, {128, 256});
  const Tensor d = on_device(kBase, DType::bf16, {64, 128});
  auto msg = [](const Tensor& a, const Tensor& b, const Tensor& d, const Tensor* sa = nullptr,
                const Tensor* sb = nullptr) { return message_of([&] { plan_gemm_sm90(a, b, d, sa, sb); }); };
  EXPECT_EQ(msg(a, b, d), "(no error)");
  EXPECT_EQ(msg(a, on_device(kBase, DType::bf16, {100, 256}), on_device(kBase, DType::bf16, {64, 100})),
            "gemm_sm90: n = 100 but it must be a multiple of 8 (bf16 pairs in the epilogue)");
  EXPECT_EQ(msg(on_device(kBase, DType::bf16, {64, 4}), on_device(kBase, DType::bf16, {128, 4}), d),
            "gemm_sm90: k = 4 (8 bytes) but a row of A and B must be a multiple of 16 bytes (TMA)");
  EXPECT_NE(msg(a, on_device(kBase, DType::f8e4m3, {128, 256}), d).find("must be both bf16 or both f8e4m3"),
            std::string::npos);
  EXPECT_NE(msg(a, b, on_device(kBase, DType::f32, {64, 128})).find("d.dtype = f32 but must be bf16"), std::string::npos);
  EXPECT_NE(msg(a, b, on_device(kBase, DType::bf16, {64, 64})).find("d.shape = [64, 64] but must be [64, 128]"),
            std::string::npos);
  EXPECT_NE(msg(Tensor(reinterpret_cast<void*>(kBase), DType::bf16, {64, 256}), b, d).find("a is on the host"),
            std::string::npos);
  EXPECT_NE(msg(a, on_device(kBase, DType::bf16, {128, 256}, 1), d).find("must share one CUDA device"),
            std::string::npos);
  EXPECT_NE(msg(on_device(kBase + 8, DType::bf16, {64, 256}), b, d).find("not 16-byte aligned"), std::string::npos);
  EXPECT_NE(msg(on_device(kBase, DType::bf16, {64, 201}).slice(1, 0, 200), on_device(kBase, DType::bf16, {128, 200}), d)
                .find("strides_bytes[1] = 402 is not a multiple of 16"),
            std::string::npos);
  EXPECT_NE(msg(on_device(kBase, DType::bf16, {65536 * 128 + 1, 256}), b, on_device(kBase, DType::bf16, {65536 * 128 + 1, 128}))
                .find("but a grid's y is at most 65535"),
            std::string::npos);
  // fp8 block scales
  const Tensor a8 = on_device(kBase, DType::f8e4m3, {64, 256}), b8 = on_device(kBase, DType::f8e4m3, {136, 256});
  const Tensor d8 = on_device(kBase, DType::bf16, {64, 136});
  const Tensor sa = on_device(kBase, DType::f32, {64, 2}), sb = on_device(kBase, DType::f32, {2, 2});
  EXPECT_EQ(msg(a8, b8, d8, &sa, &sb), "(no error)");
  EXPECT_EQ(msg(a8, b8, d8, &sa, nullptr), "gemm_sm90: give both a_scales and b_scales, or neither");
  EXPECT_NE(msg(a, on_device(kBase, DType::bf16, {136, 256}), d8, &sa, &sb).find("block scales are for f8e4m3"),
            std::string::npos);
  EXPECT_NE(msg(a8, b8, d8, &sa, &sa).find("b_scales.shape = [64, 2] but must be [2, 2]"), std::string::npos);
  EXPECT_NE(msg(a8, b8, d8, &sb, &sb).find("a_scales.shape = [2, 2] but must be [64, 2]"), std::string::npos);
  const Tensor a8k = on_device(kBase, DType::f8e4m3, {64, 192}), b8k = on_device(kBase, DType::f8e4m3, {136, 192});
  EXPECT_EQ(msg(a8k, b8k, d8, &sa, &sb), "gemm_sm90: k = 192 but fp8 block scales need a multiple of 128");
  const Tensor sa_host = Tensor(reinterpret_cast<void*>(kBase), DType::f32, {64, 2});
  EXPECT_NE(msg(a8, b8, d8, &sa_host, &sb).find("a_scales is on cpu but A is on cuda:0"), std::string::npos);
}

// Without a device, launching is refused with discovery's reason once the arguments pass.
TEST(Sm90GemmLaunch, LaunchWithoutADeviceSaysWhy) {
  if (!cuda_discovery().devices.empty()) GTEST_SKIP() << "this machine has a CUDA device";
  const Tensor a = on_device(kBase, DType::bf16, {64, 256}), b = on_device(kBase, DType::bf16, {128, 256});
  const Tensor d = on_device(kBase, DType::bf16, {64, 128});
  const std::string e = message_of([&] { gemm_sm90(a, b, d); });
  EXPECT_NE(e.find(cuda_discovery().reason), std::string::npos) << e;
  EXPECT_NE(message_of([&] { gemm_sm90(a, b, on_device(kBase, DType::bf16, {64, 100})); }).find("d.shape"),
            std::string::npos);
}

}  // namespace
}  // namespace sol
