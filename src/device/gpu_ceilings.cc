// The device ceilings' names and units, and measure_gpu_ceiling's checks; the loops themselves
// are in cuda/ceiling_loops.cc (built only with the CUDA backend).
#include <algorithm>
#include <cctype>
#include <ctime>
#include <iterator>

#include "device/gpu_ceilings.h"
#include "sol/device.h"
#include "sol/error.h"

#if SOL_HAS_CUDA
#include "device/cuda/ceiling_loops.h"
#endif

namespace sol {

namespace {
std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}
}  // namespace

bool gpu_ceiling_is_memory(std::string_view name) {
  return name == "hbm_read" || name == "hbm_copy" || name == "hbm_write" || name == "l2_read";
}

std::string_view gpu_ceiling_for(Unit u) {
  switch (u) {
    case Unit::mem_read: return "hbm_read";
    case Unit::mem_copy:
    case Unit::mem_triad:
    case Unit::mem_update: return "hbm_copy";
    case Unit::mem_write: return "hbm_write";
    case Unit::l2_read: return "l2_read";
    case Unit::fma_f32: return "fma_f32";
    case Unit::dot_bf16:
    case Unit::amx_bf16: return "mma_bf16";
    case Unit::mma_fp8: return "mma_fp8";
    case Unit::dot_s8:
    case Unit::amx_int8:
    case Unit::clock: return "";
  }
  return "";
}

std::string_view gpu_ceiling_note(std::string_view name) {
  if (name == "hbm_read") return "16-byte loads over 512 MiB, grid-stride, 4 in flight per thread";
  if (name == "hbm_copy") return "16-byte loads and stores, 512 MiB to 512 MiB (read + written bytes)";
  if (name == "hbm_write") return "16-byte stores over 512 MiB";
  if (name == "l2_read") return "16-byte loads over a quarter of L2, 64 passes per launch";
  if (name == "fma_f32") return "8 independent FFMA chains per thread, 2048 threads per SM";
  if (name == "mma_bf16") return "dense wgmma m64n256k16 bf16, 2 warpgroups per SM, operands in shared memory";
  if (name == "mma_fp8") return "dense wgmma m64n256k32 e4m3, 2 warpgroups per SM, operands in shared memory";
  return "";
}

std::string gpu_datasheet_name(std::string_view device_name) {
  std::string lower(device_name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  // Whole words only: "h100" in "NVIDIA H100 80GB HBM3", never inside another model number.
  for (const char* name : {"h200", "h100", "h800", "b200"}) {
    const size_t at = lower.find(name);
    if (at == std::string::npos) continue;
    const size_t end = at + std::string_view(name).size();
    const bool starts = at == 0 || !std::isalnum(static_cast<unsigned char>(lower[at - 1]));
    const bool ends = end == lower.size() || !std::isalnum(static_cast<unsigned char>(lower[end]));
    if (starts && ends) return name;
  }
  return "";
}

double GpuProfile::value(std::string_view name) const {
  for (const GpuCeiling& c : ceilings)
    if (c.name == name) return c.value;
  return 0;
}

std::string gpu_identity(Device device) {
  const CudaDeviceInfo& d = cuda_device(device.index);
  return d.name + "|" + d.arch() + "|" + std::to_string(d.sm_count) + " SMs|" + std::to_string(d.memory_bytes) +
         " B|driver " + std::to_string(cuda_discovery().driver_version);
}

GpuProfile measure_gpu(Device device, const std::function<void(std::string_view)>& progress) {
  GpuProfile p;
  p.identity = gpu_identity(device);
  const double start = now_seconds();
  for (std::string_view name : kGpuCeilingNames) {
    if (progress) progress(name);
    p.ceilings.push_back({std::string(name), measure_gpu_ceiling(name, device, 0.25)});
  }
  p.measure_seconds = now_seconds() - start;
  p.measured_at = utc_now();
  return p;
}

double measure_gpu_ceiling(std::string_view name, Device device, double seconds) {
  check(std::find(std::begin(kGpuCeilingNames), std::end(kGpuCeilingNames), name) != std::end(kGpuCeilingNames),
        "measure_gpu_ceiling", "unknown ceiling '", name, "'");
  check(!device.is_cpu(), "measure_gpu_ceiling", "device = cpu; CPU ceilings are measure_ceiling's");
  check(seconds > 0, "measure_gpu_ceiling", "seconds = ", seconds, " but must be > 0");
  cuda_device(device.index);  // sol::Error with discovery's reason when there is none
#if SOL_HAS_CUDA
  return cuda::measure_ceiling_loop(name, device, seconds);
#else
  fail("measure_gpu_ceiling", cuda_discovery().reason);
#endif
}

}  // namespace sol
