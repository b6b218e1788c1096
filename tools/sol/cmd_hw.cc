// sol hw [--json] [--remeasure] — the measured ceilings of this machine.
#include <fmt/format.h>

#include <optional>
#include <vector>

#include "cli.h"
#include "device/gpu_ceilings.h"
#include "sol/comm_bench.h"
#include "sol/device.h"
#include "sol/error.h"
#include "sol/model.h"
#include "sol/tuning.h"

namespace sol::cli {

namespace {
std::string yes(bool b) { return b ? "yes" : "no"; }

void print_features() {
  const CpuFeatures& f = cpu_features();
  fmt::print("cpu      {} ({}), {} cpus\n", f.model_name, f.vendor, f.logical_cpus);
  fmt::print("caches   L1d {} KiB, L2 {} KiB, L3 {} MiB\n", f.l1d_bytes >> 10, f.l2_bytes >> 10,
             f.l3_bytes >> 20);
  fmt::print("isa      avx2 {}, avx512f/bw/vl/dq {}, avx512_bf16 {}, avx512_vnni {}, avx512_vbmi {}, avx512_fp16 {}\n",
             yes(f.avx2 && f.os_avx), yes(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.os_avx512),
             yes(f.avx512_bf16), yes(f.avx512_vnni), yes(f.avx512_vbmi), yes(f.avx512_fp16));
  fmt::print("amx      tile {}, bf16 {}, int8 {} — {}\n", yes(f.amx_tile), yes(f.amx_bf16),
             yes(f.amx_int8), f.amx_status);
  fmt::print("path     best {}, active {}{}\n", isa_name(f.best_isa), isa_name(active_isa()),
             std::getenv("SOL_ISA") ? " (SOL_ISA)" : "");
}

// The core's shape and each tuning parameter: its value, and whether it is the cache-derived
// default (with the rule) or `sol tune`'s measured winner (with its speedup over the default).
void print_tuning() {
  const Tuning& t = tuning();
  fmt::print("core     {}, {}-bit vector datapath{}\n", t.core.microarch, t.core.datapath_bits,
             t.core.bf16_by_fma ? ", bf16 products as f32 FMAs (faster than its bf16 dot product)" : "");
  fmt::print("\ntuning   {}\n", t.source);
  for (const TuningChoice& c : t.choices) {
    std::string why;
    for (const TuningParamInfo& i : tuning_param_infos())
      if (c.name == i.name) why = i.rule;
    if (c.tuned && c.value != c.default_value)
      why = fmt::format("tuned: {:.2f}x faster than the default {} ({})", c.speedup, c.default_value, c.workload);
    else if (c.tuned)
      why = fmt::format("tuned: the default held ({}); default rule: {}", c.workload, why);
    else
      why = "default: " + why;
    fmt::print("  {:<26} {:>12}  {}\n", c.name, c.value, why);
  }
}

nlohmann::json tuning_json() {
  const Tuning& t = tuning();
  nlohmann::json params = nlohmann::json::array();
  for (const TuningChoice& c : t.choices)
    params.push_back({{"name", c.name}, {"value", c.value}, {"default", c.default_value}, {"tuned", c.tuned},
                      {"speedup", c.speedup}, {"workload", c.workload}});
  return {{"microarch", t.core.microarch}, {"datapath_bits", t.core.datapath_bits}, {"source", t.source},
          {"params", params}};
}

// One line per CUDA device, or one line saying why there is none.
void print_gpus() {
  const CudaDiscovery& found = cuda_discovery();
  if (found.devices.empty()) {
    fmt::print("gpu      none: {}\n", found.reason);
    return;
  }
  for (const CudaDeviceInfo& d : found.devices)
    fmt::print("gpu      cuda:{} {} ({}), {} SMs, {:.0f} GiB, L2 {:.0f} MiB, driver {}\n", d.index, d.name, d.arch(),
               d.sm_count, double(d.memory_bytes) / double(1 << 30), double(d.l2_bytes) / double(1 << 20),
               found.driver_version);
}

// The datasheet figure of each ceiling (raw units/s; 0: none published, or no datasheet).
double datasheet_value(const std::optional<HardwareSpec>& spec, std::string_view name) {
  if (!spec) return 0;
  if (gpu_ceiling_is_memory(name)) return name == "l2_read" ? 0 : spec->memory_bandwidth;
  if (name == "fma_f32") return spec->flops_f32;
  if (name == "mma_bf16") return spec->flops_bf16;
  if (name == "mma_fp8") return spec->flops_fp8;
  return 0;
}

std::optional<HardwareSpec> datasheet_of(const CudaDeviceInfo& d) {
  const std::string name = gpu_datasheet_name(d.name);
  if (name.empty()) return std::nullopt;
  try {
    return load_hardware_spec(name);
  } catch (const Error&) {
    return std::nullopt;  // no hardware/ directory next to this binary: no datasheet column
  }
}

// Each device's ceilings measured by Sol's loops (cached per device identity), the datasheet
// figure beside each: HBM in GB/s counting read plus written bytes, compute in TFLOP/s dense.
struct GpuCeilings {
  CudaDeviceInfo info;
  GpuProfile profile;
  std::optional<HardwareSpec> datasheet;
};
std::vector<GpuCeilings> gpu_ceilings(bool remeasure, bool quiet) {
  std::vector<GpuCeilings> all;
  for (const CudaDeviceInfo& d : cuda_discovery().devices) {
    auto progress = [&](std::string_view name) {
      if (!quiet) fmt::print(stderr, "measuring cuda:{} {}...\n", d.index, name);
    };
    all.push_back({d, load_or_measure_gpu(Device::cuda(d.index), remeasure, progress), datasheet_of(d)});
  }
  return all;
}

void print_gpu_ceilings(const std::vector<GpuCeilings>& all) {
  for (const GpuCeilings& g : all) {
    fmt::print("\ncuda:{} ceilings (measured {} in {:.1f} s; datasheet: {})\n", g.info.index, g.profile.measured_at,
               g.profile.measure_seconds, g.datasheet ? "hardware/" + g.datasheet->name + ".json" : "none shipped");
    fmt::print("  {:<10} {:>10} {:>10} {:>8} {:>6}  {}\n", "ceiling", "measured", "datasheet", "", "%", "loop");
    for (const GpuCeiling& c : g.profile.ceilings) {
      const bool memory = gpu_ceiling_is_memory(c.name);
      const double scale = memory ? 1e9 : 1e12, sheet = datasheet_value(g.datasheet, c.name);
      fmt::print("  {:<10} {:>10.1f} {:>10} {:>8} {:>6}  {}\n", c.name, c.value / scale,
                 sheet > 0 ? fmt::format("{:.1f}", sheet / scale) : "-", memory ? "GB/s" : "TFLOP/s",
                 sheet > 0 ? fmt::format("{:.0f}", 100 * c.value / sheet) : "-", gpu_ceiling_note(c.name));
    }
  }
}

nlohmann::json gpus_json(const std::vector<GpuCeilings>& ceilings) {
  const CudaDiscovery& found = cuda_discovery();
  nlohmann::json devices = nlohmann::json::array();
  for (const GpuCeilings& g : ceilings) {
    const CudaDeviceInfo& d = g.info;
    nlohmann::json rows = nlohmann::json::object();
    for (const GpuCeiling& c : g.profile.ceilings)
      rows[c.name] = {{"measured", c.value}, {"datasheet", datasheet_value(g.datasheet, c.name)},
                      {"unit", gpu_ceiling_is_memory(c.name) ? "B/s" : "FLOP/s"}};
    devices.push_back({{"index", d.index}, {"name", d.name}, {"arch", d.arch()}, {"sm_count", d.sm_count},
                       {"memory_bytes", d.memory_bytes}, {"l2_bytes", d.l2_bytes}, {"identity", g.profile.identity},
                       {"measured_at", g.profile.measured_at}, {"ceilings", rows}});
  }
  return {{"devices", devices}, {"reason", found.reason}, {"driver_version", found.driver_version}};
}

void print_ceilings(const MachineProfile& p) {
  fmt::print("\nceilings (measured {} in {:.1f} s)\n", p.measured_at, p.measure_seconds);
  fmt::print("  {:<10} {:>12} {:>12} {:>8}  {}\n", "unit", "1 thread", "all threads", "", "note");
  for (const Ceiling& c : p.ceilings) {
    double s = unit_display_scale(c.unit);
    if (!c.available) {
      fmt::print("  {:<10} {:>12} {:>12} {:>8}  {}\n", unit_name(c.unit), "-", "-", "", c.note);
      continue;
    }
    fmt::print("  {:<10} {:>12.1f} {:>12.1f} {:>8}  {}\n", unit_name(c.unit), c.one_thread / s,
               c.all_threads / s, unit_label(c.unit), c.note);
  }
}
// The inter-process copy ceiling behind `sol comm bench`'s SOL%: measured here by forking
// ranks (no mpirun needed); `sol comm bench` re-measures it paired with each op in its run.
void print_interprocess(const std::vector<comm::ShmCopyCeiling>& ceilings) {
  fmt::print("\ninter-process copy (shared memory, 1 thread per rank, every rank copying from the next; GB/s per rank)\n");
  fmt::print("  {:<6} {:>10} {:>10}\n", "ranks", "bytes", "GB/s");
  for (const auto& c : ceilings) {
    const bool mib = c.bytes >= (size_t(1) << 20);
    fmt::print("  {:<6} {:>9}{} {:>10.1f}\n", c.ranks, mib ? c.bytes >> 20 : c.bytes >> 10, mib ? "M" : "K", c.gbps);
  }
  fmt::print("  cached in {}\n", comm::shm_copy_ceiling_cache_path());
}
}  // namespace

void add_hw(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("hw", "Measured ceilings of this machine (cached as JSON)");
  auto json = std::make_shared<bool>(false);
  auto remeasure = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print the machine profile as JSON");
  cmd->add_flag("--remeasure", *remeasure, "Ignore the cache and measure again (< 30 s)");
  cmd->callback([=, &exit_code] {
    MachineProfile p = machine_for_cli(*remeasure, *json);
    const std::vector<comm::ShmCopyCeiling> interprocess = comm::shm_copy_ceilings(*remeasure);
    const std::vector<GpuCeilings> gpus = gpu_ceilings(*remeasure, *json);
    if (*json) {
      nlohmann::json j = nlohmann::json::parse(p.to_json());
      nlohmann::json rows = nlohmann::json::array();
      for (const auto& c : interprocess) rows.push_back({{"ranks", c.ranks}, {"bytes", c.bytes}, {"gbps", c.gbps}});
      j["interprocess_copy"] = rows;
      j["cuda"] = gpus_json(gpus);
      j["tuning"] = tuning_json();
      fmt::print("{}\n", j.dump(2));
    } else {
      print_features();
      print_gpus();
      print_tuning();
      print_ceilings(p);
      print_gpu_ceilings(gpus);
      print_interprocess(interprocess);
    }
    exit_code = kOk;
  });
}

}  // namespace sol::cli
