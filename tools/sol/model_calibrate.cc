// sol model calibrate: an efficiency layer from Sol's own kernel records, with the round trip
// printed (each record's time as the layer predicts it beside the time measured).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "model_cli.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol::cli {

void run_model_calibrate(const std::string& report, int threads, const std::string& out,
                         bool json) {
  std::vector<KernelSample> samples = read_kernel_samples(report, threads);
  Efficiency e = efficiency_from_samples(samples, "sol-kernels", report);
  if (!out.empty()) {
    std::ofstream f(out);
    check(f.good(), "sol model calibrate", "cannot write --out ", out);
    f << efficiency_json(e) << "\n";
  }
  if (json) {
    fmt::print("{}\n", efficiency_json(e));
    return;
  }
  fmt::print("{:<14} {:<30} {:<28} {:>3} {:>10} {:>10} {:>10} {:>7}\n", "op", "shape", "work",
             "thr", "floor ms", "measured", "calibrated", "error %");
  std::vector<double> errors;
  for (const KernelSample& s : samples) {
    std::string shape = s.shape.size() > 30 ? s.shape.substr(0, 27) + "..." : s.shape;
    if (!s.dropped.empty()) {
      fmt::print("{:<14} {:<30} {:<28} {:>3} {:>10.3f} {:>10.3f}  dropped: {}\n", s.op, shape,
                 s.work, s.threads, s.floor_s * 1e3, s.time_s * 1e3, s.dropped);
      continue;
    }
    double t = calibrated_time(e, s), err = 100 * (t - s.time_s) / s.time_s;
    errors.push_back(std::fabs(err));
    fmt::print("{:<14} {:<30} {:<28} {:>3} {:>10.3f} {:>10.3f} {:>10.3f} {:>+7.1f}\n", s.op, shape,
               s.work, s.threads, s.floor_s * 1e3, s.time_s * 1e3, t * 1e3, err);
  }
  std::map<std::string, int> rows;
  for (const EfficiencyRow& r : e.rows) ++rows[r.work];
  fmt::print("\n{:<28} {:>5} {:>11}\n", "work class", "rows", "efficiency");
  for (const auto& [work, n] : rows) fmt::print("{:<28} {:>5} {:>11.3f}\n", work, n, e.fraction(work));
  std::sort(errors.begin(), errors.end());
  fmt::print("\nround trip: {} records, median |error| {:.1f}%, worst {:.1f}% (a class's "
             "efficiency is its records' median: records of one class that ran at different "
             "fractions of their floor cannot all be reproduced)\n",
             errors.size(), errors[errors.size() / 2], errors.back());
  if (!out.empty()) fmt::print("written: {} (use it as sol model --calibration {})\n", out, out);
}

}  // namespace sol::cli
