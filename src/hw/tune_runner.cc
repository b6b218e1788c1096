// Timing one parameter's candidates: interleaved rounds, medians, the default kept unless beaten.
#include <algorithm>

#include "sol/error.h"
#include "sol/timing.h"
#include "sol/tuning.h"

namespace sol {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

const TuningParamInfo& info_of(const std::string& name) {
  for (const TuningParamInfo& i : tuning_param_infos())
    if (name == i.name) return i;
  fail("sol tune", "unknown parameter '", name, "'");
}

}  // namespace

TuneOutcome tune_case(const TuneCase& c, const TuningParams& base, int rounds, double margin) {
  const TuningParamInfo& info = info_of(c.param);
  check(!c.candidates.empty() && rounds >= 1, "sol tune", c.param, ": no candidates or rounds");
  const int64_t def = base.*info.field;
  std::vector<int64_t> cands = c.candidates;
  if (std::find(cands.begin(), cands.end(), def) == cands.end()) cands.push_back(def);
  const size_t n = cands.size();
  auto at = [&](int64_t v) {
    TuningParams p = base;
    p.*info.field = v;
    return p;
  };
  // One untimed run per candidate: page faults, workspace growth and code paging land here.
  for (int64_t v : cands) {
    ScopedTuning forced(at(v));
    c.run();
  }
  std::vector<std::vector<double>> times(n);
  for (int r = 0; r < rounds; ++r)
    for (size_t j = 0; j < n; ++j) {
      const size_t i = (j + size_t(r)) % n;
      ScopedTuning forced(at(cands[i]));
      const double t0 = thread_cpu_seconds();
      c.run();
      times[i].push_back(thread_cpu_seconds() - t0);
    }
  TuneOutcome o;
  o.param = c.param;
  o.workload = c.workload;
  o.default_value = def;
  double def_median = 0, best = 0;
  int64_t best_v = def;
  for (size_t i = 0; i < n; ++i) {
    const double m = median(times[i]);
    o.medians.push_back({cands[i], m});
    if (cands[i] == def) def_median = m;
    if (i == 0 || m < best) best = m, best_v = cands[i];
  }
  const bool beaten = best > 0 && def_median >= best * margin;
  o.value = beaten ? best_v : def;
  o.speedup = beaten ? def_median / best : 1.0;
  std::sort(o.medians.begin(), o.medians.end());
  return o;
}

}  // namespace sol
