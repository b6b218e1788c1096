#pragma once
// A GPU's ceilings: HBM read / copy / write (copy counts bytes read plus written), L2 read,
// fp32 FMA and the dense bf16 and fp8 tensor-core peaks, each measured by Sol's own loop
// (src/kernels/cuda/ceilings*.cuh) on the device, with the datasheet figure beside it.
// `sol bench` re-measures the ceilings of a device case's floor right beside it, as it does on
// the CPU; `sol hw` measures them all once per device and caches them (keyed by the device's
// identity, in the file of the CPU profile's cache directory).
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sol/hw.h"
#include "sol/tensor.h"
#include "sol/timing.h"

namespace sol {

// The ceilings in the order `sol hw` prints them.
inline constexpr std::string_view kGpuCeilingNames[] = {"hbm_read", "hbm_copy", "hbm_write", "l2_read",
                                                        "fma_f32",  "mma_bf16", "mma_fp8"};
bool gpu_ceiling_is_memory(std::string_view name);  // B/s; the rest are FLOP/s

// The device ceiling that bounds a cost's unit on a GPU ("" where Sol measures none: the CPU's
// int8 dot and AMX int8 units have no device loop yet, nor has the clock).
std::string_view gpu_ceiling_for(Unit u);

// Times run(set) on the device's current stream with CUDA events: warm-up runs, then a batch
// of runs enqueued back to back, each between its own pair of events, so no host gap or launch
// latency sits inside a run's time (the first run of the batch, which may have one, is only one
// of many). Stops at opt.min_runs and opt.min_seconds of device time (at most opt.max_runs and
// 4096 runs). Median, min and max of the per-run times.
Timing time_device_runs(Device device, const std::function<void(int set)>& run, const TimingOptions& opt);

// What the loop behind a ceiling does (a line for `sol hw`).
std::string_view gpu_ceiling_note(std::string_view name);

// The shipped datasheet (hardware/<name>.json) of a device called `device_name` ("NVIDIA H200"
// -> "h200"; H100, H800 and B200 likewise), or "" when Sol ships none for it.
std::string gpu_datasheet_name(std::string_view device_name);

// Measures one ceiling on `device` now, in raw units/s, spending about `seconds` of device time.
// sol::Error for an unknown name or without a device.
double measure_gpu_ceiling(std::string_view name, Device device, double seconds = 0.1);

// Every ceiling of one device, measured once and cached.
struct GpuCeiling {
  std::string name;  // one of kGpuCeilingNames
  double value = 0;  // raw units/s
};
struct GpuProfile {
  std::string identity;     // gpu_identity(): the cache key
  std::string measured_at;  // ISO-8601 UTC
  double measure_seconds = 0;
  std::vector<GpuCeiling> ceilings;  // kGpuCeilingNames order
  double value(std::string_view name) const;  // 0 when absent
};

// "NVIDIA H200|sm_90a|132 SMs|150754820096 B|driver 13000": name, architecture, SM count,
// memory and driver version; a profile cached for another identity is measured again.
std::string gpu_identity(Device device);
// Measures every ceiling of kGpuCeilingNames (a few seconds); progress(name) before each.
GpuProfile measure_gpu(Device device, const std::function<void(std::string_view)>& progress = {});
// The cache: $XDG_CACHE_HOME/sol/gpu-<digest of the identity>.json (else ~/.cache/sol/...).
std::string gpu_profile_cache_path(Device device);
std::optional<GpuProfile> load_cached_gpu(Device device);
GpuProfile load_or_measure_gpu(Device device, bool remeasure,
                               const std::function<void(std::string_view)>& progress = {});
std::string gpu_profile_json(const GpuProfile& p);
GpuProfile gpu_profile_from_json(const std::string& text);  // sol::Error when malformed

}  // namespace sol
