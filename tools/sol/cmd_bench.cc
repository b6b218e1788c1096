// sol bench OP [op flags] [--threads N] [--cold] [--json] — one op, its shape table or one shape.
#include <fmt/format.h>

#include <map>
#include <set>

#include "cli.h"
#include "sol/error.h"
#include "sol/registry.h"

namespace sol::cli {

namespace {
struct BenchArgs {
  std::string op;
  std::map<std::string, std::string> flags;  // op parameter -> value, as typed
  int threads = 0;
  bool cold = false, json = false, check = false, no_pair = false, remeasure = false, cpu_time = false,
       no_in_cache = false;
  double min_seconds = 0.2;
};

std::string ops_help() {
  std::string s = "Ops and their parameters:\n";
  for (const auto& op : registered_ops()) {
    s += fmt::format("  {:<8} {}\n", op.name, op.summary);
    for (const auto& p : op.params)
      s += fmt::format("           --{:<8} {} (default {})\n", p.name, p.help, p.default_value);
  }
  return s;
}
}  // namespace

void add_bench(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Benchmark one op: median time, TFLOP/s, GB/s, SOL%");
  cmd->add_option("op", a->op, "Op name (see below)")->required();
  // Every parameter name of every registered op is a flag; run() rejects those this op lacks.
  std::set<std::string> names;
  for (const auto& op : registered_ops())
    for (const auto& p : op.params) names.insert(p.name);
  for (const auto& n : names)
    cmd->add_option_function<std::string>("--" + n, [a, n](const std::string& v) { a->flags[n] = v; },
                                          "op parameter (see below)");
  cmd->add_option("--threads", a->threads, "Threads (default: SOL_NUM_THREADS or all cores)")
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--cold", a->cold, "Rotate input sets larger than the last-level cache");
  cmd->add_flag("--check", a->check, "Run the correctness check of each case too");
  cmd->add_flag("--no-pair", a->no_pair, "Do not re-measure the ceiling beside the op");
  cmd->add_flag("--no-in-cache", a->no_in_cache,
                "Do not also time the op shrunk to fit in L2 (the in-cache% column: memory- or instruction-bound?)");
  cmd->add_flag("--remeasure", a->remeasure, "Re-measure the cached machine profile first");
  cmd->add_option("--min-time", a->min_seconds, "Seconds of timed runs per case (default 0.2)")
      ->check(CLI::Range(0.0, 60.0));
  cmd->add_flag("--json", a->json, "Print a JSON array of records");
  cmd->add_flag("--cpu-time", a->cpu_time,
                "Time the calling thread's CPU time (needs --threads 1; floors from the cached ceilings): "
                "the stable figure on a loaded machine");
  cmd->footer(ops_help());
  cmd->callback([a, &exit_code] {
    const OpInfo& op = find_op(a->op);
    std::vector<std::map<std::string, std::string>> cases;
    if (a->flags.empty()) cases = op.bench_table;
    else cases.push_back(a->flags);
    if (cases.empty()) cases.push_back({});
    MachineProfile machine = machine_for_cli(a->remeasure, a->json);
    BenchOptions opt;
    opt.threads = a->threads;
    opt.cold = a->cold;
    opt.run_check = a->check;
    opt.pair_ceiling = !a->no_pair;
    opt.in_cache = !a->no_in_cache;
    opt.timing.min_seconds = a->min_seconds;
    if (a->cpu_time) opt.timing.clock = TimingOptions::Clock::thread_cpu;
    std::vector<BenchRecord> records;
    for (const auto& c : cases) {
      OpParams params = resolve_params(op, c);
      records.push_back(bench_case(op, params, machine, opt));
      if (!a->json) fmt::print(stderr, "  {} {} {} done\n", op.name, records.back().shape, records.back().dtype);
    }
    bool failed = false;
    for (const auto& r : records) failed |= r.check && !r.check->pass;
    if (a->json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& r : records) arr.push_back(record_json(r));
      fmt::print("{}\n", arr.dump(2));
    } else {
      fmt::print("{}", records_table(records));
      for (const auto& r : records)
        if (sol_over_limit(r))
          fmt::print(stderr, "WARNING: {} {} at {:.1f}% SOL is above the ceiling: the ceiling is wrong\n",
                     r.op, r.shape, r.sol_pct);
    }
    exit_code = failed ? kCheckFailed : kOk;
  });
}

}  // namespace sol::cli
