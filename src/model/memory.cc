// Memory per device: weights, gradients and optimizer state (sharded by ZeRO stage), the
// activations in flight under the pipeline schedule, and the KV cache of inference.
#include <algorithm>
#include <cmath>

#include "model/accounting.h"
#include "sol/error.h"

namespace sol::model_detail {

namespace {
constexpr double kGradientBytes = 4;        // fp32 gradient accumulation
constexpr double kOptimizerBytes = 4 + 4 + 4;  // fp32 master weights, Adam m and v

double layer_dense_params(const ModelConfig& m, int64_t layer) {
  ModelConfig one = m;
  one.layers = 1;
  one.vocab = 0;
  one.first_dense_layers = m.is_moe_layer(layer) ? 0 : 1;
  double all = one.total_params();
  double routed = one.is_moe_layer(0) ? 3.0 * m.hidden * m.moe_intermediate * m.routed_experts : 0;
  return all - routed;
}
}  // namespace

int64_t layers_per_stage(const ModelConfig& m, const ParallelPlan& p) {
  return (m.layers + p.pp - 1) / p.pp;
}

ParamShare params_per_device(const ModelConfig& m, const ParallelPlan& p, bool mtp) {
  // The worst stage: the last layers (MoE when the model has any) plus one of embedding/head.
  ParamShare share;
  int64_t stage = layers_per_stage(m, p);
  double expert_params = 3.0 * m.hidden * m.moe_intermediate;
  for (int64_t l = m.layers - stage; l < m.layers; ++l) {
    share.dense += layer_dense_params(m, l) / p.tp;
    if (m.is_moe_layer(l)) {
      double placed = std::ceil(experts_placed(m, p) / p.ep);
      share.expert += placed * expert_params;
      if (p.shared_expert_as_routed) share.dense -= m.shared_experts * expert_params / p.tp;
    }
  }
  // DeepSeek-V3 keeps its MTP modules on the last stage: a projection and one more layer.
  for (int64_t i = 0; mtp && i < m.mtp_layers; ++i) {
    share.dense += (2.0 * m.hidden * m.hidden + layer_dense_params(m, m.layers - 1)) / p.tp;
    if (m.is_moe_layer(m.layers - 1))
      share.expert += std::ceil(experts_placed(m, p) / p.ep) * expert_params;
  }
  double embedding = double(m.vocab) * m.hidden / p.tp;
  share.dense += p.pp > 1 || m.tied_embeddings ? embedding : 2 * embedding;
  return share;
}

Pass training_pass(const ParallelPlan& p, const Workload& w) {
  Pass pass;
  double sequences = double(w.global_batch) / (double(p.dp) * p.micro_batches);
  pass.tokens = sequences * w.seq_len;
  pass.context = (w.seq_len + 1) / 2.0;  // causal: token i attends to i + 1 keys
  pass.kv_tokens = pass.tokens;
  return pass;
}

Pass prefill_pass(const Workload& w, int micro_batches) {
  Pass pass;
  double prompt = w.prompt_tokens, cached = std::floor(prompt * w.kv_cache_hit_rate);
  double fresh = prompt - cached;
  pass.tokens = w.prefill_batch * fresh / micro_batches;
  pass.context = cached + (fresh + 1) / 2.0;
  pass.kv_tokens = w.prefill_batch * prompt / micro_batches;
  pass.writes_kv = true;
  return pass;
}

Pass decode_pass(const Workload& w, int micro_batches, int64_t draft_depth) {
  Pass pass;
  double sequences = double(w.decode_batch) / micro_batches;
  pass.tokens = sequences * double(1 + draft_depth);
  pass.context = w.context_tokens;
  pass.kv_tokens = sequences * w.context_tokens;  // the draft positions share one cache read
  pass.absorbed = true;
  pass.writes_kv = true;
  return pass;
}

MemoryUse memory_per_device(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                            const Workload& w) {
  MemoryUse mem;
  mem.capacity = hw.memory_bytes;
  bool training = w.kind == Workload::Kind::training;
  ParamShare share = params_per_device(m, p, training && w.mtp);
  double dense_dp = p.dp, expert_dp = double(p.dp) * p.tp / p.ep;
  // DualPipe holds the first and last stages' chunks on one device: two copies.
  double copies = training ? pipeline_cost(p.schedule, p.pp, p.micro_batches, 0, 0, 0, 0).param_copies : 1;
  double weight_bytes = training ? 2 : double(dtype_size(p.weight_dtype));
  auto sharded = [&](double bytes_per_param, int from_stage) {
    double dense = share.dense * bytes_per_param, expert = share.expert * bytes_per_param;
    if (p.zero_stage >= from_stage) {
      dense /= dense_dp;
      expert /= expert_dp;
    }
    return copies * (dense + expert);
  };
  mem.params = sharded(weight_bytes, 3);
  if (training) {
    mem.grads = sharded(kGradientBytes, 2);
    mem.optimizer = sharded(kOptimizerBytes, 1);
    Pass pass = training_pass(p, w);
    double saved = 0;
    int64_t stage = layers_per_stage(m, p);
    for (int64_t l = m.layers - stage; l < m.layers; ++l) {
      if (p.recompute == Recompute::full) {
        saved += pass.tokens * m.hidden * 2;  // the layer's input, in bf16
        continue;
      }
      for (const OpCost& op : layer_ops(m, hw, p, l, pass)) saved += op.saved_bytes;
    }
    for (int64_t i = 0; w.mtp && i < m.mtp_layers; ++i)
      for (const OpCost& op : mtp_ops(m, hw, p, pass)) saved += op.saved_bytes;
    mem.activations =
        saved * pipeline_cost(p.schedule, p.pp, p.micro_batches, 0, 0, 0, 0).inflight_microbatches;
  } else {
    double per_layer = kv_cache_bytes_per_token(m, p.kv_dtype) / m.layers;
    if (!m.is_mla()) per_layer *= std::max(1.0, double(m.kv_heads) / p.tp) / m.kv_heads;
    // The cache holds the decoding sequences, or a prefill-only workload's prompts.
    double tokens = std::max(double(w.decode_batch) * w.context_tokens,
                             double(w.prefill_batch) * w.prompt_tokens);
    // With pp stages, pp batches are in flight (one per stage), each caching its own layers.
    mem.kv_cache = per_layer * tokens * layers_per_stage(m, p) * p.pp;
    if (w.mtp_decode) {  // the MTP modules' own layer and projection (embedding, head shared)
      ModelConfig module = m;
      module.layers = 1;
      module.first_dense_layers = 0;
      module.vocab = 0;
      ParallelPlan one_stage = p;
      one_stage.pp = 1;
      ParamShare extra = params_per_device(module, one_stage);
      double projection = 2.0 * m.hidden * m.hidden / p.tp;
      mem.params += m.mtp_layers * (extra.dense + extra.expert + projection) *
                    double(dtype_size(p.weight_dtype));
    }
  }
  return mem;
}

void check_fits(const MemoryUse& mem, const HardwareSpec& hw, const ParallelPlan& p) {
  constexpr double GB = 1e9;
  check(mem.total() <= mem.capacity, "model",
        "does not fit: plan ", p.name, " needs ", mem.total() / GB, " GB per device (params ",
        mem.params / GB, ", grads ", mem.grads / GB, ", optimizer ", mem.optimizer / GB,
        ", activations ", mem.activations / GB, ", kv cache ", mem.kv_cache / GB, ") but ",
        hw.name, " has ", mem.capacity / GB, " GB; use more devices, more sharding or a "
        "smaller batch");
}

}  // namespace sol::model_detail

namespace sol {

double kv_cache_bytes_per_token(const ModelConfig& m, DType kv_dtype) {
  double per_layer = m.is_mla() ? double(m.kv_lora_rank + m.qk_rope_dim)
                                : 2.0 * m.kv_heads * m.head_dim;
  return per_layer * m.layers * double(dtype_size(kv_dtype));
}

}  // namespace sol
