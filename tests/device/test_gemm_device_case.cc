// The gemm registry entry on a device (src/ops/gemm/gemm_device_op.cc) without one: what the device
// path cannot take is named before any device is looked up (fp8 among it, whose floor needs a
// unit sol::Unit lacks), an anchor on the CPU is an error, and a valid device request names why
// there is no device. The runs are the gpu test `gemm_bench_case_on_device`.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ops/error_message.h"
#include "sol/device.h"
#include "sol/registry.h"

namespace sol {
namespace {

std::string error_of_case(std::map<std::string, std::string> given) {
  const OpInfo& op = find_op("gemm");
  return testing_errors::message_of([&] { op.make(resolve_params(op, given), 0); });
}

TEST(GemmDeviceCase, WhatTheDevicePathLacksIsNamed) {
  const std::map<std::string, std::string> ok{{"device", "cuda"}, {"dtype", "bf16"}, {"layout", "nt"}};
  auto with = [&](const char* k, const char* v) {
    auto g = ok;
    g[k] = v;
    return error_of_case(g);
  };
  EXPECT_NE(with("dtype", "fp8").find("mma_fp8"), std::string::npos) << with("dtype", "fp8");
  EXPECT_NE(with("dtype", "f32").find("takes bf16"), std::string::npos);
  EXPECT_NE(with("layout", "nn").find("--layout nt"), std::string::npos);
  EXPECT_NE(with("packed", "1").find("no pack_b"), std::string::npos);
  EXPECT_NE(with("beta", "1").find("epilogue"), std::string::npos);
  EXPECT_NE(with("act", "silu").find("epilogue"), std::string::npos);
  EXPECT_NE(with("out", "f32").find("D is bf16"), std::string::npos);
  EXPECT_NE(with("anchor", "cublas").find("sol or cublaslt"), std::string::npos);
  if (!cuda_discovery().devices.empty()) GTEST_SKIP() << "a device exists: the gpu test runs the case";
  // Valid on a device, but there is none: discovery's reason, not a crash.
  EXPECT_NE(error_of_case(ok).find("device"), std::string::npos) << error_of_case(ok);
}

TEST(GemmDeviceCase, AnchorsNeedADevice) {
  EXPECT_NE(error_of_case({{"anchor", "cublaslt"}}).find("anchors are timed on a device"), std::string::npos);
  EXPECT_EQ(error_of_case({{"m", "3"}, {"n", "5"}, {"k", "7"}}), "(no error)");
}

}  // namespace
}  // namespace sol
