// The gemm and gemm-grouped registry entries on a device (src/ops/gemm/gemm_device_op.cc,
// grouped_gemm_device_op.cc) without one: what the device path cannot take is named before any
// device is looked up, an anchor on the CPU is an error, the host checks behind the device's
// arguments (anchor, fp8 scale kind, the device's architecture, the scaling cuBLASLt can run)
// give their clear errors, and a valid device request names why there is no device. The runs are
// the gpu test `gemm_bench_case_on_device`.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ops/error_message.h"
#include "ops/gemm/gemm_device_bench.h"
#include "sol/device.h"
#include "sol/error.h"
#include "sol/registry.h"

namespace sol {
namespace {

std::string error_of_case(const char* name, std::map<std::string, std::string> given) {
  const OpInfo& op = find_op(name);
  return testing_errors::message_of([&] { op.make(resolve_params(op, given), 0); });
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(GemmDeviceCase, WhatTheDevicePathLacksIsNamed) {
  const std::map<std::string, std::string> ok{{"device", "cuda"}, {"dtype", "bf16"}, {"layout", "nt"}};
  auto with = [&](std::map<std::string, std::string> extra) {
    auto g = ok;
    for (const auto& [k, v] : extra) g[k] = v;
    return error_of_case("gemm", g);
  };
  EXPECT_TRUE(has(with({{"dtype", "f32"}}), "takes bf16 or fp8")) << with({{"dtype", "f32"}});
  EXPECT_TRUE(has(with({{"dtype", "bf16xfp8"}}), "takes bf16 or fp8"));
  EXPECT_TRUE(has(with({{"dtype", "fp8"}, {"k", "200"}}), "k % 128 == 0")) << with({{"dtype", "fp8"}, {"k", "200"}});
  EXPECT_TRUE(has(with({{"dtype", "fp8"}, {"scales", "e8m0"}}), "--scales = 'e8m0' but must be f32 or ue8m0"));
  EXPECT_TRUE(has(with({{"scales", "ue8m0"}}), "only fp8 operands have scales"));
  EXPECT_TRUE(has(with({{"layout", "nn"}}), "--layout nt"));
  EXPECT_TRUE(has(with({{"packed", "1"}}), "no pack_b"));
  EXPECT_TRUE(has(with({{"beta", "1"}}), "epilogue"));
  EXPECT_TRUE(has(with({{"act", "silu"}}), "epilogue"));
  EXPECT_TRUE(has(with({{"out", "f32"}}), "D is bf16"));
  EXPECT_TRUE(has(with({{"anchor", "cublas"}}), "--anchor = 'cublas' but must be none or cublaslt"));
  if (!cuda_discovery().devices.empty()) GTEST_SKIP() << "a device exists: the gpu test runs the case";
  // Valid on a device, but there is none: discovery's reason, not a crash.
  for (const auto& extra : {std::map<std::string, std::string>{},
                            {{"dtype", "fp8"}, {"scales", "ue8m0"}, {"anchor", "cublaslt"}}})
    EXPECT_TRUE(has(with(extra), "no CUDA device")) << with(extra);
}

TEST(GemmDeviceCase, TheGroupedGemmOnADeviceNamesWhatItLacks) {
  const std::map<std::string, std::string> ok{{"device", "cuda"}, {"rows", "5,0,17"}, {"n", "256"}, {"k", "256"}};
  auto with = [&](std::map<std::string, std::string> extra) {
    auto g = ok;
    for (const auto& [k, v] : extra) g[k] = v;
    return error_of_case("gemm-grouped", g);
  };
  EXPECT_TRUE(has(with({{"dtype", "bf16xfp8"}}), "bf16 x fp8 is not on the device"));
  EXPECT_TRUE(has(with({{"layout", "ragged"}}), "contiguous or masked"));
  EXPECT_TRUE(has(with({{"dtype", "fp8"}, {"k", "200"}}), "k % 128 == 0"));
  EXPECT_TRUE(has(with({{"dtype", "fp8"}, {"scales", "f16"}}), "must be f32 or ue8m0"));
  EXPECT_TRUE(has(with({{"scales", "ue8m0"}}), "only fp8 operands have scales"));
  EXPECT_TRUE(has(with({{"anchor", "torch"}}), "must be none or cublaslt"));
  EXPECT_TRUE(has(with({{"rows", "5,x"}}), "--rows entry 'x' is not a number"));
  if (!cuda_discovery().devices.empty()) GTEST_SKIP() << "a device exists: the gpu test runs the case";
  EXPECT_TRUE(has(with({{"dtype", "fp8"}, {"layout", "masked"}}), "no CUDA device")) << with({{"dtype", "fp8"}});
}

TEST(GemmDeviceCase, AnchorsNeedADeviceAndScalesNeedFp8OnTheCpuToo) {
  EXPECT_TRUE(has(error_of_case("gemm", {{"anchor", "cublaslt"}}), "anchors are timed on a device"));
  EXPECT_TRUE(has(error_of_case("gemm-grouped", {{"anchor", "cublaslt"}}), "anchors are timed on a device"));
  EXPECT_EQ(error_of_case("gemm", {{"m", "3"}, {"n", "5"}, {"k", "7"}}), "(no error)");
  EXPECT_TRUE(has(error_of_case("gemm", {{"dtype", "bf16"}, {"scales", "ue8m0"}}), "only fp8 operands have scales"));
  EXPECT_TRUE(has(error_of_case("gemm", {{"dtype", "fp8"}, {"layout", "nt"}, {"scales", "E8M0"}}), "f32 or ue8m0"));
}

// The CPU cases take UE8M0 scales (powers of two) and still match the reference.
TEST(GemmDeviceCase, Ue8m0ScalesOnTheCpuMatchTheReference) {
  const OpInfo& gemm = find_op("gemm");
  auto c = gemm.make(resolve_params(gemm, {{"m", "13"}, {"n", "130"}, {"k", "384"}, {"dtype", "fp8"},
                                           {"layout", "nt"}, {"scales", "ue8m0"}}),
                     0);
  EXPECT_TRUE(has(c->shape(), ",ue8m0")) << c->shape();
  const CheckResult r = c->check();
  EXPECT_TRUE(r.pass) << r.detail;
  const OpInfo& grouped = find_op("gemm-grouped");
  auto g = grouped.make(
      resolve_params(grouped, {{"rows", "5,0,17,1"}, {"n", "40"}, {"k", "256"}, {"dtype", "fp8"}, {"scales", "ue8m0"}}),
      0);
  const CheckResult rg = g->check();
  EXPECT_TRUE(rg.pass) << rg.detail;
}

TEST(GemmDeviceBenchArgs, AnchorAndScaleKinds) {
  EXPECT_EQ(parse_device_gemm_anchor("gemm", "none"), DeviceGemmAnchor::none);
  EXPECT_EQ(parse_device_gemm_anchor("gemm", "cublaslt"), DeviceGemmAnchor::cublaslt);
  for (const char* bad : {"", "sol", "cuBLASLt", "cublas"})
    EXPECT_TRUE(has(testing_errors::message_of([&] { parse_device_gemm_anchor("gemm", bad); }),
                    std::string("gemm: --anchor = '") + bad + "'"))
        << bad;
  EXPECT_EQ(parse_gemm_scales("gemm", "f32", true), ScaleFormat::f32);
  EXPECT_EQ(parse_gemm_scales("gemm", "ue8m0", true), ScaleFormat::ue8m0);
  EXPECT_EQ(parse_gemm_scales("gemm", "f32", false), ScaleFormat::f32);
  EXPECT_THROW(parse_gemm_scales("gemm", "ue8m0", false), Error);
  EXPECT_THROW(parse_gemm_scales("gemm", "bf16", true), Error);
}

TEST(GemmDeviceBenchArgs, Fp8NeedsFp8TensorCoresAndTheKernelsHopper) {
  const Device d = Device::cuda(1);
  const std::string ampere = testing_errors::message_of([&] { check_device_gemm_arch("gemm", d, 8, 0, true); });
  EXPECT_TRUE(has(ampere, "gemm: --dtype fp8 on cuda:1 (compute capability 8.0): the device has no fp8 tensor cores"))
      << ampere;
  const std::string ada = testing_errors::message_of([&] { check_device_gemm_arch("gemm", d, 8, 9, true); });
  EXPECT_TRUE(has(ada, "sm_90a")) << ada;
  EXPECT_TRUE(has(testing_errors::message_of([&] { check_device_gemm_arch("gemm", d, 8, 0, false); }), "sm_90a"));
  EXPECT_TRUE(has(testing_errors::message_of([&] { check_device_gemm_arch("gemm", d, 10, 0, true); }), "sm_90a"));
  EXPECT_NO_THROW(check_device_gemm_arch("gemm", d, 9, 0, true));
  EXPECT_NO_THROW(check_device_gemm_arch("gemm", d, 9, 0, false));
}

TEST(GemmDeviceBenchArgs, TheAnchorsScalingOrWhyItCannotRun) {
  const CublasLtLibrary missing{false, 0, "", "cannot load cuBLASLt (libcublasLt.so.13: not found)"};
  const std::string e = testing_errors::message_of([&] { device_gemm_anchor_scaling("gemm", missing, 9, 0, false); });
  EXPECT_TRUE(has(e, "gemm: --anchor cublaslt cannot run here: cannot load cuBLASLt")) << e;
  const CublasLtLibrary v13{true, 130100, "libcublasLt.so.13", ""}, v12_8{true, 120800, "libcublasLt.so.12", ""};
  EXPECT_EQ(device_gemm_anchor_scaling("gemm", v13, 9, 0, false), CublasLtFp8Scaling::none);
  EXPECT_EQ(device_gemm_anchor_scaling("gemm", v13, 9, 0, true), CublasLtFp8Scaling::block_1x128_128x128);
  EXPECT_EQ(device_gemm_anchor_scaling("gemm", v12_8, 9, 0, true), CublasLtFp8Scaling::per_tensor);
  EXPECT_EQ(device_gemm_anchor_scaling("gemm", v13, 10, 0, true), CublasLtFp8Scaling::per_tensor);
  const std::string no_fp8 = testing_errors::message_of([&] { device_gemm_anchor_scaling("gemm", v13, 8, 0, true); });
  EXPECT_TRUE(has(no_fp8, "cannot run fp8: cuBLASLt 13.1.0 has no fp8 on compute capability 8.0")) << no_fp8;
}

// Without a device the anchor's calls cannot be prepared: a clear error, not a crash.
TEST(GemmDeviceBenchArgs, AnchorCallsWithoutADeviceSayWhy) {
  if (!cuda_discovery().devices.empty()) GTEST_SKIP() << "a device exists: the gpu test prepares the anchor";
  CublasLtAnchorCalls calls(Device::cuda(0), DType::bf16, CublasLtFp8Scaling::none);
  EXPECT_EQ(calls.describe(), "cuBLASLt (no rows to multiply)");
  Buffer a(DType::bf16, {0, 128}), b(DType::bf16, {64, 128}), d(DType::bf16, {0, 64});
  EXPECT_NO_THROW(calls.add(0, a, b, d, nullptr, nullptr)) << "no rows: nothing to prepare";
  EXPECT_NO_THROW(calls.run(0));
  EXPECT_THROW(calls.run(1), Error);
  Buffer a1(DType::bf16, {4, 128}), d1(DType::bf16, {4, 64});
  EXPECT_THROW(calls.add(0, a1, b, d1, nullptr, nullptr), Error);
}

}  // namespace
}  // namespace sol
