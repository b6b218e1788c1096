// The GPU profile cache (src/device/gpu_ceilings.h): one small JSON file per device identity under
// Sol's cache root, published atomically (core/disk_cache.h). A missing, corrupt or foreign
// file only means measuring again.
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/disk_cache.h"
#include "device/gpu_ceilings.h"
#include "sol/error.h"

namespace sol {

std::string gpu_profile_json(const GpuProfile& p) {
  nlohmann::json ceilings = nlohmann::json::object();
  for (const GpuCeiling& c : p.ceilings) ceilings[c.name] = c.value;
  return nlohmann::json{{"identity", p.identity},
                        {"measured_at", p.measured_at},
                        {"measure_seconds", p.measure_seconds},
                        {"ceilings", ceilings}}
      .dump(2);
}

GpuProfile gpu_profile_from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  check(j.is_object() && j.contains("identity") && j["identity"].is_string() && j.contains("ceilings") &&
            j["ceilings"].is_object(),
        "gpu profile", "expected an object with \"identity\" and \"ceilings\"");
  GpuProfile p;
  p.identity = j["identity"];
  p.measured_at = j.value("measured_at", "");
  p.measure_seconds = j.value("measure_seconds", 0.0);
  for (std::string_view name : kGpuCeilingNames) {
    const auto it = j["ceilings"].find(std::string(name));
    check(it != j["ceilings"].end() && it->is_number() && it->get<double>() >= 0, "gpu profile", "ceiling '", name,
          "' missing or not a non-negative number");
    p.ceilings.push_back({std::string(name), it->get<double>()});
  }
  return p;
}

std::string gpu_profile_cache_path(Device device) {
  return disk_cache::sol_cache_root() + "/gpu-" + disk_cache::digest(gpu_identity(device)) + ".json";
}

std::optional<GpuProfile> load_cached_gpu(Device device) {
  const std::string path = gpu_profile_cache_path(device);
  const std::string text = disk_cache::read_file(path);
  if (text.empty()) return std::nullopt;
  try {
    GpuProfile p = gpu_profile_from_json(text);
    if (p.identity == gpu_identity(device)) return p;
  } catch (const Error& e) {
    std::cerr << "sol: warning: ignoring " << path << ": " << e.what() << "\n";
  }
  return std::nullopt;
}

GpuProfile load_or_measure_gpu(Device device, bool remeasure, const std::function<void(std::string_view)>& progress) {
  if (!remeasure)
    if (std::optional<GpuProfile> cached = load_cached_gpu(device)) return *cached;
  GpuProfile p = measure_gpu(device, progress);
  try {
    const std::string path = gpu_profile_cache_path(device);
    disk_cache::make_dirs(disk_cache::sol_cache_root(), "gpu profile");
    disk_cache::publish_file(path, gpu_profile_json(p) + "\n", "gpu profile");
  } catch (const Error& e) {
    std::cerr << "sol: warning: " << e.what() << " (the measured GPU profile is used, but not cached)\n";
  }
  return p;
}

}  // namespace sol
