// Inference: prefill (time to first token) and one decode step (time per output token) of a
// request batch on one data-parallel replica. With two-micro-batch overlap the batch is split
// in two and one half's communication runs under the other half's computation, layer by layer.
#include <algorithm>

#include "model/phase_sum.h"
#include "model/steps.h"

namespace sol::model_detail {

namespace {
struct PassTime {
  PhaseSum total;
  double time_s = 0;
  double link_s = 0;  // the same pass if only the links' bandwidth counted
};

PassTime run_pass(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                  const Pass& pass, double head_tokens, PhaseAccumulator& acc,
                  int64_t draft_depth = 0) {
  int micro = p.overlap ? 2 : 1;
  PassTime r;
  for (int64_t l = 0; l < m.layers; ++l) {
    PhaseSum layer = acc.add(layer_ops(m, hw, p, l, pass), micro);
    r.time_s += layer.time_s(p.overlap);
    r.link_s += layer.comm_bandwidth_s();
    r.total.add(layer);
  }
  // MTP drafting: each module runs once per sequence (on its last position) for the next draft.
  Pass draft = pass;
  draft.tokens = pass.tokens / double(1 + draft_depth);
  draft.kv_tokens = pass.kv_tokens;
  for (int64_t i = 0; i < draft_depth; ++i) {
    PhaseSum module = acc.add(mtp_ops(m, hw, p, draft, false), micro);
    r.time_s += module.time_s(p.overlap);
    r.link_s += module.comm_bandwidth_s();
    r.total.add(module);
  }
  Pass head = pass;
  head.tokens = head_tokens;
  PhaseSum tail = acc.add(head_ops(m, p, head, false), 1);
  if (p.pp > 1) tail.add(acc.add({pipeline_send(hw, p, pass.tokens * micro, m.hidden)}, p.pp - 1));
  r.time_s += tail.time_s(false);
  r.total.add(tail);
  return r;
}
}  // namespace

void predict_inference(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                       const Workload& w, Prediction& out) {
  int micro = p.overlap ? 2 : 1;
  PhaseAccumulator prefill_acc(hw, "prefill"), decode_acc(hw, "decode");
  // Only the last position of each prompt needs logits.
  PassTime prefill = run_pass(m, hw, p, prefill_pass(w, micro), double(w.prefill_batch),
                              prefill_acc);
  int64_t depth = w.mtp_decode ? m.mtp_layers : 0;
  PassTime decode = run_pass(m, hw, p, decode_pass(w, micro, depth),
                             double(w.decode_batch) * double(1 + depth), decode_acc, depth);
  // Each step keeps 1 + a + ... + a^depth tokens per sequence (1 without MTP).
  double kept = w.tokens_per_decode_step(depth);
  out.phases.push_back(make_phase("prefill", prefill.total, prefill.time_s));
  out.phases.push_back(make_phase("decode", decode.total, decode.time_s));
  for (const auto* acc : {&prefill_acc, &decode_acc})
    out.ops.insert(out.ops.end(), acc->records().begin(), acc->records().end());

  out.ttft_s = prefill.time_s;
  out.tpot_s = decode.time_s / kept;
  out.tpot_link_limit_s = decode.link_s / kept;
  out.step_s = decode.time_s;
  // pp stages each hold one batch in flight, so a replica finishes pp batches per step.
  double tokens_per_step = double(w.decode_batch) * p.dp * p.pp * kept;
  out.tokens_per_s = tokens_per_step / decode.time_s;
  out.tokens_per_s_per_device = out.tokens_per_s / p.devices();
  double matrix_flops = 0;
  for (const OpRecord& r : decode_acc.records())
    if (r.kind == "gemm" || r.kind == "attention") matrix_flops += r.flops;
  // One device's share of one batch through every layer, times the devices of a replica.
  out.model_flops_per_token = matrix_flops * p.tp / (double(w.decode_batch) * kept);
  out.mfu = matrix_flops / (out.tpot_s * hw.flops(p.gemm_dtype));
}

}  // namespace sol::model_detail
