// The per-phase table `sol model` prints.
#include <cstdio>
#include <string>

#include "sol/model.h"

namespace sol {

namespace {
std::string line(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}
std::string ms(double s) { return line("%.3f", s * 1e3); }
}  // namespace

std::string prediction_table(const Prediction& p) {
  constexpr double GB = 1e9;
  bool training = p.kind == Workload::Kind::training;
  std::string out = line("model %s on %d x %s, plan %s, workload %s (%s)\n\n", p.model.c_str(),
                         p.devices, p.hardware.c_str(), p.plan.c_str(), p.workload.c_str(),
                         training ? "training" : "inference");
  out += line("%-18s %12s %12s %12s %12s %12s %12s  %s\n", "phase", "time ms", "compute ms",
              "memory ms", "comm ms", "exposed ms", "bubble ms", "bottleneck");
  for (const PhaseResult& ph : p.phases)
    out += line("%-18s %12s %12s %12s %12s %12s %12s  %s\n", ph.name.c_str(), ms(ph.time_s).c_str(),
                ms(ph.compute_s).c_str(), ms(ph.memory_s).c_str(), ms(ph.comm_s).c_str(),
                ms(ph.exposed_comm_s).c_str(), ms(ph.bubble_s).c_str(), ph.bottleneck.c_str());
  out += "\n";
  if (training) {
    out += line("step %.3f s, %.0f tokens/s (%.1f per device), %.1f GFLOP/token, MFU %.1f%%\n",
                p.step_s, p.tokens_per_s, p.tokens_per_s_per_device,
                p.model_flops_per_token / 1e9, 100 * p.mfu);
  } else {
    out += line("TTFT %.2f ms, TPOT %.3f ms (link bandwidth alone: %.3f ms), %.0f tokens/s "
                "(%.1f per device), MFU %.1f%%\n",
                p.ttft_s * 1e3, p.tpot_s * 1e3, p.tpot_link_limit_s * 1e3, p.tokens_per_s,
                p.tokens_per_s_per_device, 100 * p.mfu);
  }
  if (!p.pipeline.schedule.empty()) {
    const Prediction::Pipeline& pl = p.pipeline;
    out += line("pipeline %s per chunk: F %s ms, B %s ms (W %s ms), F&B %s ms; bubble simulated "
                "%s ms, closed form %s ms; peak activations %.0f micro-batches\n",
                pl.schedule.c_str(), ms(pl.f_s).c_str(), ms(pl.b_s).c_str(), ms(pl.w_s).c_str(),
                ms(pl.fb_s).c_str(), ms(pl.simulated_bubble_s).c_str(),
                ms(pl.formula_bubble_s).c_str(), pl.peak_inflight);
  }
  const MemoryUse& m = p.memory;
  out += line("memory per device %.1f of %.1f GB: params %.1f, grads %.1f, optimizer %.1f, "
              "activations %.1f, kv cache %.1f\n",
              m.total() / GB, m.capacity / GB, m.params / GB, m.grads / GB, m.optimizer / GB,
              m.activations / GB, m.kv_cache / GB);
  return out;
}

}  // namespace sol
