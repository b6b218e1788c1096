// The GPU profile's parts that hold without a GPU: the datasheet a device name maps to, and the
// cache's JSON (round trip, and clear errors for what a corrupt file holds).
#include <gtest/gtest.h>

#include <string>

#include "device/gpu_ceilings.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol {
namespace {

TEST(GpuProfile, DeviceNamesMapToShippedDatasheets) {
  EXPECT_EQ(gpu_datasheet_name("NVIDIA H200"), "h200");
  EXPECT_EQ(gpu_datasheet_name("NVIDIA H200 NVL"), "h200");
  EXPECT_EQ(gpu_datasheet_name("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(gpu_datasheet_name("NVIDIA H800"), "h800");
  EXPECT_EQ(gpu_datasheet_name("NVIDIA B200"), "b200");
  EXPECT_EQ(gpu_datasheet_name("NVIDIA GH200 480GB"), "");  // another part, not an H200
  EXPECT_EQ(gpu_datasheet_name("NVIDIA H1000"), "");
  EXPECT_EQ(gpu_datasheet_name("NVIDIA A100-SXM4-80GB"), "");
  EXPECT_EQ(gpu_datasheet_name(""), "");
  for (const char* name : {"h200", "h100", "h800", "b200"}) {
    const HardwareSpec spec = load_hardware_spec(name);
    EXPECT_GT(spec.memory_bandwidth, 0) << name;
    EXPECT_GT(spec.flops_bf16, 0) << name;
  }
}

GpuProfile sample() {
  GpuProfile p;
  p.identity = "NVIDIA H200|sm_90a|132 SMs|150754820096 B|driver 13000";
  p.measured_at = "2026-12-05T06:00:00Z";
  p.measure_seconds = 3.5;
  double v = 1e12;
  for (std::string_view name : kGpuCeilingNames) p.ceilings.push_back({std::string(name), v *= 1.5});
  return p;
}

TEST(GpuProfile, JsonRoundTrip) {
  const GpuProfile p = sample();
  const GpuProfile q = gpu_profile_from_json(gpu_profile_json(p));
  EXPECT_EQ(q.identity, p.identity);
  EXPECT_EQ(q.measured_at, p.measured_at);
  EXPECT_EQ(q.measure_seconds, p.measure_seconds);
  ASSERT_EQ(q.ceilings.size(), std::size(kGpuCeilingNames));
  for (const GpuCeiling& c : p.ceilings) EXPECT_EQ(q.value(c.name), c.value) << c.name;
  EXPECT_EQ(q.value("no_such_ceiling"), 0);
}

TEST(GpuProfile, CorruptJsonIsAClearError) {
  auto error_of = [](const std::string& text) {
    try {
      gpu_profile_from_json(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_NE(error_of("not json").find("expected an object"), std::string::npos);
  EXPECT_NE(error_of("{\"ceilings\": {}}").find("expected an object"), std::string::npos);
  EXPECT_NE(error_of("{\"identity\": \"x\", \"ceilings\": {\"hbm_read\": 1}}").find("ceiling 'hbm_copy' missing"),
            std::string::npos);
  std::string all;
  for (std::string_view name : kGpuCeilingNames)
    all += std::string(all.empty() ? "" : ", ") + "\"" + std::string(name) + "\": " + (name == "l2_read" ? "-1" : "1");
  EXPECT_NE(error_of("{\"identity\": \"x\", \"ceilings\": {" + all + "}}").find("ceiling 'l2_read'"), std::string::npos)
      << all;
  EXPECT_EQ(error_of("{\"identity\": \"x\", \"ceilings\": {" + all.replace(all.find("-1"), 2, "2") + "}}"), "(no error)");
}

}  // namespace
}  // namespace sol
