#include <fmt/format.h>

#include <cmath>

#include "cli.h"

namespace sol::cli {

bool sol_over_limit(const BenchRecord& r) { return r.sol_pct > 100.0; }
bool ceiling_unsteady(const BenchRecord& r) { return r.ceiling_moved > kCeilingMovedLimit; }
bool in_cache_measured(const BenchRecord& r) { return r.in_cache_s > 0; }

nlohmann::json record_json(const BenchRecord& r) { return nlohmann::json::parse(bench_record_json(r)); }

std::string records_table(const std::vector<BenchRecord>& records) {
  bool any_anchor = false;
  for (const auto& r : records) any_anchor |= r.anchor.has_value();
  std::string out = fmt::format("{:<8} {:<18} {:<14} {:>3} {:>11} {:>9} {:>8} {:<8} {:>7}{} {:>9} {:<6}\n",
                                "op", "shape", "dtype", "thr", "median", "TFLOP/s", "GB/s",
                                "bound", "SOL%", any_anchor ? anchor_table_header() : "", "in-cache%", "check");
  bool any_in_cache = false, any_unsteady = false;
  for (const auto& r : records) {
    std::string check = !r.check ? "-" : r.check->pass ? "ok" : "FAIL";
    // NaN: the op had no work to do, so no SOL%.
    std::string sol = std::isnan(r.sol_pct) ? "-"
                      : fmt::format("{:.1f}{}", r.sol_pct, sol_over_limit(r) ? "!!" : ceiling_unsteady(r) ? "~" : "");
    any_unsteady |= ceiling_unsteady(r);
    std::string in_cache = in_cache_measured(r) ? fmt::format("{:.1f}", r.in_cache_sol_pct) : "-";
    any_in_cache |= in_cache_measured(r);
    out += fmt::format("{:<8} {:<18} {:<14} {:>3} {:>9.3f}ms {:>9.3f} {:>8.1f} {:<8} {:>7}{} {:>9} {:<6}\n",
                       r.op, r.shape, r.dtype, r.threads, r.timing.median_s * 1e3, r.tflops, r.gbps,
                       bound_name(r.floor.bound), sol, any_anchor ? anchor_table_cells(r) : "", in_cache, check);
  }
  out += anchor_table_legend(records);
  if (any_unsteady)
    out += fmt::format("~: a paired ceiling moved by more than {:.0f}% between its measurements before and after the "
                       "op (the machine's memory state changed): that SOL% is uncertain, run it again\n",
                       (kCeilingMovedLimit - 1) * 100);
  if (any_in_cache)
    out += "in-cache%: the SOL% of the same op shrunk to fit in L2 and run hot, against the same floor: far above "
           "SOL%, memory holds the op back; near it or below the target, its instructions do\n";
  for (const auto& r : records)
    if (r.cpu_time) {
      out += "median: CPU time of the calling thread (--cpu-time), floor from the cached ceilings\n";
      break;
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
