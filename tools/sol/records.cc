#include <fmt/format.h>

#include "cli.h"

namespace sol::cli {

bool sol_over_limit(const BenchRecord& r) { return r.sol_pct > 100.0; }

nlohmann::json record_json(const BenchRecord& r) {
  nlohmann::json j = {
      {"op", r.op},
      {"shape", r.shape},
      {"dtype", r.dtype},
      {"threads", r.threads},
      {"isa", r.isa},
      {"cold", r.cold},
      {"input_sets", r.input_sets},
      {"time_s", r.timing.median_s},
      {"min_s", r.timing.min_s},
      {"max_s", r.timing.max_s},
      {"runs", r.timing.runs},
      {"flops", r.cost.flops},
      {"bytes", r.cost.bytes},
      {"tflops", r.tflops},
      {"gbps", r.gbps},
      {"bound", std::string(bound_name(r.floor.bound))},
      {"floor_s", r.floor.floor_s},
      {"sol_pct", r.sol_pct},
      {"compute_unit", std::string(unit_name(r.cost.compute))},
      {"memory_unit", std::string(unit_name(r.cost.memory))},
      {"ceiling_unit", std::string(unit_name(r.ceiling_unit))},
      {"ceiling_paired", r.ceiling_paired},
      {"ceiling_cached", r.ceiling_cached},
      {"sol_pct_cached", r.sol_pct_cached},
      {"sol_over_100", sol_over_limit(r)},
  };
  if (r.check)
    j["check"] = {{"pass", r.check->pass}, {"error", r.check->error},
                  {"tolerance", r.check->tolerance}, {"detail", r.check->detail}};
  return j;
}

std::string records_table(const std::vector<BenchRecord>& records) {
  std::string out = fmt::format("{:<8} {:<18} {:<14} {:>3} {:>11} {:>9} {:>8} {:<8} {:>7} {:<6}\n",
                                "op", "shape", "dtype", "thr", "median", "TFLOP/s", "GB/s",
                                "bound", "SOL%", "check");
  for (const auto& r : records) {
    std::string check = !r.check ? "-" : r.check->pass ? "ok" : "FAIL";
    std::string sol = fmt::format("{:.1f}{}", r.sol_pct, sol_over_limit(r) ? "!!" : "");
    out += fmt::format("{:<8} {:<18} {:<14} {:>3} {:>9.3f}ms {:>9.3f} {:>8.1f} {:<8} {:>7} {:<6}\n",
                       r.op, r.shape, r.dtype, r.threads, r.timing.median_s * 1e3, r.tflops, r.gbps,
                       bound_name(r.floor.bound), sol, check);
  }
  return out;
}

MachineProfile machine_for_cli(bool remeasure, bool quiet) {
  bool announced = false;
  auto progress = [&](Unit u) {
    if (quiet) return;
    if (!announced) fmt::print(stderr, "measuring this machine's ceilings (cached afterwards in {})\n", machine_cache_path());
    announced = true;
    fmt::print(stderr, "  {} ...\n", unit_name(u));
  };
  return load_or_measure_machine(remeasure, progress);
}

}  // namespace sol::cli
