// Floor beside calibrated prediction (`sol model --calibration`).
#include <map>

#include "model/text_format.h"
#include "sol/model.h"

namespace sol {

namespace {
std::string ms(double s) { return model_text::format("%.3f", s * 1e3); }
}  // namespace

std::string calibrated_table(const Prediction& floor, const Prediction& cal, const Efficiency& e) {
  using model_text::format;
  bool training = floor.kind == Workload::Kind::training;
  std::string out = format("\nfloor beside calibrated (efficiency layer %s, %s)\n", e.name.c_str(),
                           e.origin.empty() ? "built in this run" : e.origin.c_str());
  out += format("%-22s %14s %14s %8s\n", "phase", "floor ms", "calibrated ms", "ratio");
  for (size_t i = 0; i < floor.phases.size() && i < cal.phases.size(); ++i) {
    double f = floor.phases[i].time_s, c = cal.phases[i].time_s;
    out += format("%-22s %14s %14s %8s\n", floor.phases[i].name.c_str(), ms(f).c_str(),
                  ms(c).c_str(), f > 0 ? format("%.2fx", c / f).c_str() : "-");
  }
  auto row = [&](const char* what, double f, double c, const char* unit, double scale) {
    out += format("%-22s %14.3f %14.3f %8s  %s\n", what, f * scale, c * scale,
                  f > 0 ? format("%.2fx", c / f).c_str() : "-", unit);
  };
  if (training) {
    row("step", floor.step_s, cal.step_s, "s", 1);
  } else {
    row("TTFT", floor.ttft_s, cal.ttft_s, "ms", 1e3);
    row("TPOT", floor.tpot_s, cal.tpot_s, "ms", 1e3);
  }
  row("tokens/s per device", floor.tokens_per_s_per_device, cal.tokens_per_s_per_device, "", 1);
  row(format("MFU of the %s peak", floor.mfu_peak.c_str()).c_str(), floor.mfu, cal.mfu, "%", 100);
  if (e.comm_sm_fraction > 0)
    out += format("computation overlapped with communication runs on %.0f%% of the SMs (%s)\n",
                  100 * (1 - e.comm_sm_fraction), e.comm_sm_source.c_str());

  struct Work { double floor_s = 0, cal_s = 0; };
  std::map<std::string, Work> by_work;
  std::map<std::pair<std::string, std::string>, double> floor_of;
  for (const OpRecord& r : floor.ops) floor_of[{r.phase, r.name}] = r.floor_s;
  for (const OpRecord& r : cal.ops) {
    Work& w = by_work[r.work];
    w.floor_s += floor_of[{r.phase, r.name}];
    w.cal_s += r.floor_s;
  }
  out += format("\n%-34s %12s %14s %10s  %s\n", "work class", "floor ms", "calibrated ms",
                "efficiency", "from");
  for (const auto& [work, w] : by_work) {
    std::string used;
    double f = e.fraction(work, &used);
    out += format("%-34s %12s %14s %10.3f  %s\n", work.c_str(), ms(w.floor_s).c_str(),
                  ms(w.cal_s).c_str(), f, used.empty() ? "uncalibrated: at its floor" : used.c_str());
  }
  return out;
}

}  // namespace sol
