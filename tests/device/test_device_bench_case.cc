// The device side of `sol bench` that holds without a GPU: the `device` parameter's parsing,
// the clear error when a case asks for a device that is not there, and the ceiling names.
// The timed path itself is the gpu test bench_cases_on_device (tests/device/gpu).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <string>

#include "device/gpu_ceilings.h"
#include "sol/bench.h"
#include "sol/device.h"
#include "sol/error.h"
#include "sol/registry.h"
#include "ops/error_message.h"

namespace sol {
namespace {

// What a call throws, as text (tests/ops/error_message.h).
std::string error_of(const std::function<void()>& f) { return testing_errors::message_of(f); }

TEST(DeviceParam, ParsesCpuCudaAndCudaN) {
  EXPECT_EQ(parse_device("cpu", "t"), Device::cpu());
  EXPECT_EQ(parse_device("cuda", "t"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:0", "t"), Device::cuda(0));
  EXPECT_EQ(parse_device("cuda:13", "t"), Device::cuda(13));
  for (const char* bad : {"", "gpu", "CUDA", "cuda:", "cuda:-1", "cuda:1x", "cuda:99999", " cuda", "cpu:0"}) {
    const std::string e = error_of([&] { parse_device(bad, "copy: --device"); });
    EXPECT_NE(e.find("copy: --device"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find(std::string("'") + bad + "'"), std::string::npos) << bad << ": " << e;
  }
}

TEST(DeviceParam, CopyAndCastDefaultToCpu) {
  for (const char* name : {"copy", "cast"}) {
    const OpInfo& op = find_op(name);
    EXPECT_EQ(op.make(resolve_params(op, {{"n", "5"}}), 0)->device(), Device::cpu()) << name;
    EXPECT_EQ(op.make(resolve_params(op, {{"n", "5"}, {"device", "cpu"}}), 0)->device(), Device::cpu()) << name;
  }
}

// Without a device, a case on one is refused before anything is allocated, with discovery's
// reason (the gpu test bench_cases_on_device covers the other side).
TEST(DeviceParam, AskingForAMissingDeviceSaysWhy) {
  const CudaDiscovery& found = cuda_discovery();
  if (!found.devices.empty()) GTEST_SKIP() << "this machine has a CUDA device";
  for (const char* name : {"copy", "cast"}) {
    const OpInfo& op = find_op(name);
    for (const char* device : {"cuda", "cuda:7"}) {
      const OpParams p = resolve_params(op, {{"n", "5"}, {"device", device}});
      const std::string e = error_of([&] { op.make(p, 0); });
      EXPECT_NE(e.find(std::string(name) + ": --device = " + device + " but there is no CUDA device: " + found.reason),
                std::string::npos)
          << e;
    }
  }
}

// A device case rotates sets exactly when it moves fewer bytes than four times the device's
// reported L2: rmsnorm + residual at 4096 x 7168 bf16 (four 58.7 MB passes) rotates on an H200
// (60 MiB of L2) and runs its one set on an H100 (50 MiB), which the gpu test once wrongly
// expected to rotate everywhere.
TEST(DeviceColdBytes, FourTimesTheReportedL2) {
  const double residual_bytes = 4.0 * 4096 * 7168 * 2;
  EXPECT_EQ(device_cold_bytes(int64_t(50) << 20), int64_t(200) << 20);
  EXPECT_EQ(device_cold_bytes(int64_t(60) << 20), int64_t(240) << 20);
  EXPECT_GT(residual_bytes, double(device_cold_bytes(int64_t(50) << 20)));
  EXPECT_LT(residual_bytes, double(device_cold_bytes(int64_t(60) << 20)));
  EXPECT_EQ(device_cold_bytes(0), int64_t(64) << 20);  // an unreported L2 counts as 16 MiB
}

TEST(GpuCeilings, EachCostUnitMapsToADeviceCeilingOrNone) {
  EXPECT_EQ(gpu_ceiling_for(Unit::mem_copy), "hbm_copy");
  EXPECT_EQ(gpu_ceiling_for(Unit::mem_read), "hbm_read");
  EXPECT_EQ(gpu_ceiling_for(Unit::mem_write), "hbm_write");
  EXPECT_EQ(gpu_ceiling_for(Unit::l2_read), "l2_read");
  EXPECT_EQ(gpu_ceiling_for(Unit::fma_f32), "fma_f32");
  EXPECT_EQ(gpu_ceiling_for(Unit::amx_bf16), "mma_bf16");
  EXPECT_EQ(gpu_ceiling_for(Unit::amx_int8), "");
  EXPECT_EQ(gpu_ceiling_for(Unit::mma_fp8), "mma_fp8");  // the device fp8 GEMM's floor
  for (Unit u : kAllUnits) {
    const std::string_view name = gpu_ceiling_for(u);
    if (name.empty()) continue;
    EXPECT_NE(std::find(std::begin(kGpuCeilingNames), std::end(kGpuCeilingNames), name), std::end(kGpuCeilingNames));
    EXPECT_EQ(gpu_ceiling_is_memory(name), unit_is_memory(u)) << unit_name(u);
  }
}

TEST(GpuCeilings, BadRequestsAreErrors) {
  EXPECT_NE(error_of([] { measure_gpu_ceiling("hbm_speed", Device::cuda(0)); }).find("unknown ceiling 'hbm_speed'"),
            std::string::npos);
  EXPECT_NE(error_of([] { measure_gpu_ceiling("hbm_copy", Device::cpu()); }).find("device = cpu"), std::string::npos);
  EXPECT_NE(error_of([] { time_device_runs(Device::cpu(), [](int) {}, {}); }).find("device = cpu"), std::string::npos);
  if (cuda_discovery().devices.empty()) {
    const std::string e = error_of([] { measure_gpu_ceiling("hbm_copy", Device::cuda(0)); });
    EXPECT_NE(e.find(cuda_discovery().reason), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace sol
