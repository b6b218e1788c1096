// A benchmark record as JSON, shared by the CLI (`--json`, report.json) and the Python API.
#include <nlohmann/json.hpp>

#include "sol/bench.h"

namespace sol {

std::string bench_record_json(const BenchRecord& r) {
  nlohmann::json j = {
      {"op", r.op},
      {"shape", r.shape},
      {"dtype", r.dtype},
      {"threads", r.threads},
      {"isa", r.isa},
      {"cold", r.cold},
      {"clock", r.cpu_time ? "thread_cpu" : "wall"},
      {"input_sets", r.input_sets},
      {"time_s", r.timing.median_s},
      {"min_s", r.timing.min_s},
      {"max_s", r.timing.max_s},
      {"runs", r.timing.runs},
      {"flops", r.cost.flops},
      {"bytes", r.cost.bytes},
      {"read_bytes", r.cost.read_bytes},
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
      {"sol_over_100", r.sol_pct > 100.0},  // the ceiling under it must be wrong
      {"ceiling_moved", r.ceiling_moved},   // > kCeilingMovedLimit: SOL% uncertain
      {"in_cache_shape", r.in_cache_shape},  // "" and zeros: not measured
      {"in_cache_s", r.in_cache_s},
      {"in_cache_sol_pct", r.in_cache_sol_pct},
  };
  // Absent without an anchor, so every reader of records older than anchors reads these too.
  if (r.anchor)
    j["anchor"] = {{"name", r.anchor->name},
                   {"time_s", r.anchor->timing.median_s},
                   {"min_s", r.anchor->timing.min_s},
                   {"max_s", r.anchor->timing.max_s},
                   {"runs", r.anchor->timing.runs},
                   {"sol_pct", r.anchor->sol_pct},
                   {"sol_speedup", anchor_speedup(r)}};  // anchor time / Sol time: > 1, Sol is faster
  if (r.check)
    j["check"] = {{"pass", r.check->pass}, {"error", r.check->error},
                  {"tolerance", r.check->tolerance}, {"detail", r.check->detail}};
  return j.dump();
}

}  // namespace sol
