// The per-phase table `sol model` prints.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "model/text_format.h"
#include "sol/model.h"

namespace sol {

namespace {
template <class... Args>
std::string line(const char* f, Args... args) {
  return model_text::format(f, args...);
}
std::string ms(double s) { return line("%.3f", s * 1e3); }

// Training MFU against the peak of the plan's GEMM dtype first, then the other matrix peak for
// comparison, labelled as such: an FP8 step measured against the bf16 peak can pass 100%.
std::string training_mfu_line(const Prediction& p) {
  const Prediction::Training& t = p.training;
  auto pct = [](double v) { return v > 0 ? line("%.1f%%", 100 * v) : std::string("-"); };
  auto figures = [&](double causal, double non_causal) {
    return line("%s causal, %s non-causal", pct(causal).c_str(), pct(non_causal).c_str());
  };
  const std::string bf16 = figures(t.mfu_bf16_causal, t.mfu_bf16_non_causal);
  const std::string fp8 = figures(t.mfu_fp8_causal, t.mfu_fp8_non_causal);
  if (p.mfu_peak == "fp8")
    return "MFU of the fp8 peak (the plan's GEMM dtype): " + fp8 + "; for comparison, of the bf16 peak: " + bf16 + "\n";
  if (p.mfu_peak == "bf16")
    return "MFU of the bf16 peak (the plan's GEMM dtype): " + bf16 + "; for comparison, of the fp8 peak: " + fp8 + "\n";
  return "MFU for comparison, of the bf16 peak: " + bf16 + "; of the fp8 peak: " + fp8 + "\n";
}
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
    const Prediction::Training& t = p.training;
    out += line("step %.3f s, %.0f tokens/s (%.1f per device, %.1fM per device per day), "
                "%.1f GFLOP/token, MFU %.1f%% of the %s peak\n",
                p.step_s, p.tokens_per_s, p.tokens_per_s_per_device,
                t.tokens_per_day_per_device / 1e6, p.model_flops_per_token / 1e9, 100 * p.mfu,
                p.mfu_peak.c_str());
    out += line("%12s %12s %12s %12s %12s %12s %12s %12s\n", "F chunk ms", "B input ms",
                "B weight ms", "body ms", "bubble ms", "grad sync ms", "optimizer ms", "step ms");
    out += line("%12s %12s %12s %12s %12s %12s %12s %12s\n", ms(t.forward_s).c_str(),
                ms(t.backward_input_s).c_str(), ms(t.backward_weight_s).c_str(),
                ms(t.body_s).c_str(), ms(t.bubble_s).c_str(), ms(t.grad_sync_s).c_str(),
                ms(t.optimizer_s).c_str(), ms(p.step_s).c_str());
    out += training_mfu_line(p);
  } else {
    const Prediction::Serving& s = p.serving;
    if (p.ttft_s > 0)
      out += line("prefill: TTFT %.2f ms, %.0f prompt tokens/s per node of %d devices\n",
                  p.ttft_s * 1e3, s.prefill_tokens_per_s_per_node, s.devices_per_node);
    if (p.tpot_s > 0)
      out += line("decode: TPOT %.3f ms (link bandwidth alone: %.3f ms), %.0f tokens/s (%.1f per "
                  "device, %.0f per node of %d devices)\n",
                  p.tpot_s * 1e3, p.tpot_link_limit_s * 1e3, p.tokens_per_s,
                  p.tokens_per_s_per_device, s.decode_tokens_per_s_per_node, s.devices_per_node);
    out += line("MFU %.1f%% of the %s peak (%.1f GFLOP per %s token x tokens/s per device / the "
                "plan's GEMM-dtype peak)\n", 100 * p.mfu, p.mfu_peak.c_str(),
                p.model_flops_per_token / 1e9, p.tpot_s > 0 ? "decoded" : "prompt");
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

std::string prediction_ops_table(const Prediction& p, int top) {
  if (top <= 0) return {};
  std::vector<std::string> phases;
  std::map<std::string, std::vector<const OpRecord*>> by_phase;
  std::map<std::string, double> phase_total;
  for (const OpRecord& r : p.ops) {
    if (!by_phase.count(r.phase)) phases.push_back(r.phase);
    by_phase[r.phase].push_back(&r);
    phase_total[r.phase] += r.floor_s;
  }
  std::string out;
  for (const std::string& phase : phases) {
    std::vector<const OpRecord*>& ops = by_phase[phase];
    std::stable_sort(ops.begin(), ops.end(), [](const OpRecord* a, const OpRecord* b) {
      return a->floor_s > b->floor_s;
    });
    out += line("\n%s: the %d largest of %zu ops (per device, all repetitions; links run beside "
                "the device)\n", phase.c_str(), std::min<int>(top, int(ops.size())), ops.size());
    out += line("%-28s %-11s %8s %12s %10s %10s %11s %7s  %s\n", "op", "kind", "count", "GFLOP",
                "GB", "link GB", "floor ms", "share", "bound");
    for (int i = 0; i < top && i < int(ops.size()); ++i) {
      const OpRecord& r = *ops[i];
      double share = phase_total[phase] > 0 ? 100 * r.floor_s / phase_total[phase] : 0;
      std::string bound = r.kind == "comm" ? std::string(link_name(r.link)) : r.bound;
      out += line("%-28s %-11s %8.0f %12.1f %10.3f %10.3f %11s %6.1f%%  %s\n", r.name.c_str(),
                  r.kind.c_str(), r.count, r.flops / 1e9, r.bytes / 1e9, r.link_bytes / 1e9,
                  ms(r.floor_s).c_str(), share, bound.c_str());
    }
  }
  return out;
}

}  // namespace sol
