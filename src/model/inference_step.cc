// Inference: prefill (time to first token) and one decode step (time per output token) of a
// request batch on one data-parallel replica. With two-micro-batch overlap the batch is split
// in two and one half's communication runs under the other half's computation, layer by layer.
#include <algorithm>
#include <cmath>

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
  PhaseAccumulator prefill_acc(hw, "prefill"), decode_acc(hw, "decode", PassKind::decode);
  // pp stages each hold one batch in flight, so a replica finishes pp batches per pass.
  double replicas = double(p.dp) * p.pp;
  Prediction::Serving& serving = out.serving;
  serving.devices_per_node = std::min(p.devices(), std::max(1, hw.scale_up_size));
  double nodes = double(p.devices()) / serving.devices_per_node;
  if (w.prefill_batch > 0) {
    // Only the last position of each prompt needs logits.
    PassTime prefill = run_pass(m, hw, p, prefill_pass(w, micro), double(w.prefill_batch),
                                prefill_acc);
    out.phases.push_back(make_phase("prefill", prefill.total, prefill.time_s));
    out.ttft_s = prefill.time_s;
    double fresh = double(w.prompt_tokens) - std::floor(w.prompt_tokens * w.kv_cache_hit_rate);
    serving.prefill_tokens_per_s = double(w.prefill_batch) * fresh * replicas / prefill.time_s;
    serving.prefill_tokens_per_s_per_node = serving.prefill_tokens_per_s / nodes;
  }
  if (w.decode_batch > 0) {
    int64_t depth = w.mtp_decode ? m.mtp_layers : 0;
    PassTime decode = run_pass(m, hw, p, decode_pass(w, micro, depth),
                               double(w.decode_batch) * double(1 + depth), decode_acc, depth);
    // Each step keeps 1 + a + ... + a^depth tokens per sequence (1 without MTP).
    double kept = w.tokens_per_decode_step(depth);
    out.phases.push_back(make_phase("decode", decode.total, decode.time_s));
    out.tpot_s = decode.time_s / kept;
    out.tpot_link_limit_s = decode.link_s / kept;
    out.step_s = decode.time_s;
    out.tokens_per_s = double(w.decode_batch) * replicas * kept / decode.time_s;
    out.tokens_per_s_per_device = out.tokens_per_s / p.devices();
    serving.decode_tokens_per_s_per_node = out.tokens_per_s / nodes;
    // MFU by its definition: useful FLOPs per token (one token's forward at the context; MTP's
    // drafting is not useful work) x tokens/s per device / the GEMM dtype's peak.
    out.model_flops_per_token = decode_flops_per_token(m, w.context_tokens);
    out.mfu = out.model_flops_per_token * out.tokens_per_s_per_device / hw.flops(p.gemm_dtype);
  } else {
    // Prefill only: its own throughput and MFU (forward FLOPs of the fresh prompt tokens).
    out.step_s = out.ttft_s;
    out.tokens_per_s = serving.prefill_tokens_per_s;
    out.tokens_per_s_per_device = out.tokens_per_s / p.devices();
    out.model_flops_per_token = training_flops_per_token(m, w.prompt_tokens, false) / 3;
    out.mfu = out.model_flops_per_token * out.tokens_per_s_per_device / hw.flops(p.gemm_dtype);
  }
  for (const auto* acc : {&prefill_acc, &decode_acc})
    out.ops.insert(out.ops.end(), acc->records().begin(), acc->records().end());
}

}  // namespace sol::model_detail
