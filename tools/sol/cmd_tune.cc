// sol tune [--family F] [--rounds N] — times each tuning parameter's candidates on this machine
// (one thread, interleaved rounds, medians) and caches the winners in tuning.json.
#include <fmt/format.h>

#include "cli.h"
#include "hw/cpu_identity.h"
#include "ops/tune/tune_cases.h"
#include "sol/threads.h"
#include "sol/timing.h"
#include "sol/tuning.h"

namespace sol::cli {

void add_tune(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "tune", "Time each tuning parameter's candidates here and cache the fastest (tuning.json beside the "
              "machine profile; SOL_TUNING=defaults ignores it)");
  auto family = std::make_shared<std::string>();
  auto rounds = std::make_shared<int>(7);
  cmd->add_option("--family", *family, "Only this family: gemm, stream, softmax or rows");
  cmd->add_option("--rounds", *rounds, "Interleaved rounds per parameter (the median counts)")
      ->check(CLI::Range(1, 99));
  cmd->callback([=, &exit_code] {
    const double t0 = now_seconds();
    const CoreShape& core = core_shape();
    fmt::print("tuning for {} ({}, {}-bit datapath; L1d {} KiB, L2 {} KiB, L3 {} MiB), one thread\n",
               cpu_features().model_name, core.microarch, core.datapath_bits, core.l1d_bytes >> 10,
               core.l2_bytes >> 10, core.l3_bytes >> 20);
    set_num_threads(1);  // the timings are on this thread's CPU clock
    const TuneCases cases = tune_cases(*family);
    // Each parameter is timed with the ones tuned before it at their winners.
    TuningParams base = default_tuning_params(core);
    std::vector<TuneOutcome> outcomes;
    for (const TuneCase& c : cases.cases) {
      fmt::print("  {:<26} {} ...", c.param, c.workload);
      std::fflush(stdout);
      TuneOutcome o = tune_case(c, base, *rounds);
      for (const TuningParamInfo& i : tuning_param_infos())
        if (o.param == i.name) base.*i.field = o.value;
      fmt::print(" {} {}\n", o.value,
                 o.value == o.default_value ? std::string("(the default holds)")
                                            : fmt::format("(default {}: {:.2f}x slower)", o.default_value, o.speedup));
      std::string line = "    medians:";
      for (const auto& [v, s] : o.medians) line += fmt::format(" {}={:.3g}ms", v, s * 1e3);
      fmt::print("{}\n", line);
      outcomes.push_back(std::move(o));
    }
    const std::string path = tuning_cache_path();
    save_tuning(path, cpu_identity(), outcomes);
    reload_tuning();
    fmt::print("saved {} ({:.1f} s)\n", path, now_seconds() - t0);
    exit_code = kOk;
  });
}

}  // namespace sol::cli
