// The GPU ceilings of `sol hw` on the device: each loop runs and gives a rate, the rates are
// in the order the hardware dictates (L2 above HBM, fp8 tensor cores above bf16 above FFMA),
// and on an H200 or an H100 SXM5 (the device-check machines; other "H100" parts, PCIe and NVL,
// run other clocks and memories) each is within (50%, 105%] of its datasheet figure (above: the loop's byte or FLOP count is wrong;
// far below: it does not reach the unit's peak). One "CEILING {json}" line per ceiling for
// scripts/device-check.sh.
#include <cstdio>
#include <map>
#include <string>

#include "gpu_test.h"
#include "device/gpu_ceilings.h"
#include "sol/device.h"

namespace sol {

SOL_GPU_TEST(ceilings) {
  const Device dev = Device::cuda(0);
  const CudaDeviceInfo& info = cuda_device(0);
  const GpuProfile p = measure_gpu(dev);
  // Datasheet figures (hardware/<name>.json; this program does not link the JSON reader).
  const std::map<std::string, std::map<std::string, double>> sheets = {
      {"h200", {{"hbm", 4.8e12}, {"fma_f32", 66.9e12}, {"mma_bf16", 989.4e12}, {"mma_fp8", 1978.9e12}}},
      {"h100", {{"hbm", 3.35e12}, {"fma_f32", 66.9e12}, {"mma_bf16", 989.4e12}, {"mma_fp8", 1978.9e12}}},
  };
  // The SXM5 part is the one that reports "80GB HBM3"; the PCIe card has HBM2e.
  std::string model = gpu_datasheet_name(info.name);
  if (model == "h100" && info.name.find("80GB HBM3") == std::string::npos) model.clear();
  const auto sheet = sheets.find(model);
  for (const GpuCeiling& c : p.ceilings) {
    SOL_EXPECT(c.value > 0, c.name);
    double expected = 0;
    if (sheet != sheets.end()) {
      const std::string key = gpu_ceiling_is_memory(c.name) ? "hbm" : c.name;
      if (c.name != "l2_read" && sheet->second.count(key)) expected = sheet->second.at(key);
    }
    if (expected > 0)
      SOL_EXPECT(c.value > 0.5 * expected && c.value <= 1.05 * expected, c.name, " = ", c.value, ", datasheet ",
                 expected);
    std::printf("CEILING {\"device\": \"%s\", \"ceiling\": \"%s\", \"measured\": %.6g, \"datasheet\": %.6g, "
                "\"unit\": \"%s\"}\n",
                info.name.c_str(), c.name.c_str(), c.value, expected, gpu_ceiling_is_memory(c.name) ? "B/s" : "FLOP/s");
  }
  SOL_EXPECT(p.value("l2_read") > p.value("hbm_read"), "L2 ", p.value("l2_read"), " HBM ", p.value("hbm_read"));
  SOL_EXPECT(p.value("mma_fp8") > p.value("mma_bf16"), p.value("mma_fp8"), " vs ", p.value("mma_bf16"));
  SOL_EXPECT(p.value("mma_bf16") > p.value("fma_f32"), p.value("mma_bf16"), " vs ", p.value("fma_f32"));
}

}  // namespace sol
