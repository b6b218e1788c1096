// The JSON record of a prediction (`sol model --json`).
#include <nlohmann/json.hpp>

#include "sol/model.h"

namespace sol {

std::string prediction_json(const Prediction& p) {
  using nlohmann::json;
  json phases = json::array(), ops = json::array();
  for (const PhaseResult& ph : p.phases)
    phases.push_back({{"phase", ph.name}, {"time_s", ph.time_s}, {"compute_s", ph.compute_s},
                      {"memory_s", ph.memory_s}, {"comm_s", ph.comm_s},
                      {"exposed_comm_s", ph.exposed_comm_s}, {"bubble_s", ph.bubble_s},
                      {"bottleneck", ph.bottleneck}});
  for (const OpRecord& r : p.ops)
    ops.push_back({{"phase", r.phase}, {"op", r.name}, {"kind", r.kind}, {"count", r.count},
                   {"flops", r.flops}, {"bytes", r.bytes}, {"link_bytes", r.link_bytes},
                   {"link", link_name(r.link)}, {"floor_s", r.floor_s}, {"bound", r.bound}, {"work", r.work}});
  const MemoryUse& m = p.memory;
  json out = {
      {"model", p.model}, {"hardware", p.hardware}, {"plan", p.plan}, {"workload", p.workload},
      {"kind", p.kind == Workload::Kind::training ? "training" : "inference"},
      {"devices", p.devices}, {"step_s", p.step_s}, {"tokens_per_s", p.tokens_per_s},
      {"tokens_per_s_per_device", p.tokens_per_s_per_device},
      {"model_flops_per_token", p.model_flops_per_token}, {"mfu", p.mfu}, {"mfu_peak", p.mfu_peak},
      {"memory_bytes", {{"params", m.params}, {"grads", m.grads}, {"optimizer", m.optimizer},
                        {"activations", m.activations}, {"kv_cache", m.kv_cache},
                        {"total", m.total()}, {"capacity", m.capacity}}},
      {"phases", phases}, {"ops", ops}};
  if (!p.pipeline.schedule.empty()) {
    const Prediction::Pipeline& pl = p.pipeline;
    out["pipeline"] = {{"schedule", pl.schedule}, {"f_s", pl.f_s}, {"b_s", pl.b_s},
                       {"w_s", pl.w_s}, {"fb_s", pl.fb_s},
                       {"simulated_bubble_s", pl.simulated_bubble_s},
                       {"formula_bubble_s", pl.formula_bubble_s}, {"makespan_s", pl.makespan_s},
                       {"peak_inflight_microbatches", pl.peak_inflight}};
  }
  if (p.kind == Workload::Kind::inference) {
    out["ttft_s"] = p.ttft_s;
    out["tpot_s"] = p.tpot_s;
    out["tpot_link_limit_s"] = p.tpot_link_limit_s;
    const Prediction::Serving& s = p.serving;
    out["serving"] = {{"prefill_tokens_per_s", s.prefill_tokens_per_s},
                      {"prefill_tokens_per_s_per_node", s.prefill_tokens_per_s_per_node},
                      {"decode_tokens_per_s_per_node", s.decode_tokens_per_s_per_node},
                      {"devices_per_node", s.devices_per_node}};
  } else {
    const Prediction::Training& t = p.training;
    out["breakdown"] = {{"forward_s", t.forward_s}, {"backward_input_s", t.backward_input_s},
                        {"backward_weight_s", t.backward_weight_s}, {"body_s", t.body_s},
                        {"bubble_s", t.bubble_s}, {"grad_sync_s", t.grad_sync_s},
                        {"optimizer_s", t.optimizer_s},
                        {"tokens_per_day_per_device", t.tokens_per_day_per_device},
                        {"mfu_bf16_causal", t.mfu_bf16_causal},
                        {"mfu_bf16_non_causal", t.mfu_bf16_non_causal},
                        {"mfu_fp8_causal", t.mfu_fp8_causal},
                        {"mfu_fp8_non_causal", t.mfu_fp8_non_causal}};
  }
  return out.dump(2);
}

}  // namespace sol
