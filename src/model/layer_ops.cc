// FLOPs, bytes and saved activations of every operator of one layer, per device, forward.
// Activations move in bf16; weights in the plan's weight dtype. A GEMM's floor reads its input
// and weight once and writes its output once; attention is counted as a fused kernel (Q, K, V
// read once, O written once) and counts only the unmasked half of causal scores.
#include <algorithm>
#include <cmath>

#include "model/accounting.h"

namespace sol::model_detail {

namespace {
constexpr double kActivationBytes = 2;  // bf16

struct LayerBuilder {
  const ModelConfig& m;
  const HardwareSpec& hw;
  const ParallelPlan& p;
  const Pass& pass;
  std::vector<OpCost> ops;

  double weight_bytes() const { return double(dtype_size(p.weight_dtype)); }

  // rows x cols output from inner-dimension k; `weights` is how many weight matrices of
  // k x cols are read (grouped expert GEMMs read several).
  void gemm(const std::string& name, double rows, double cols, double k, double weights = 1) {
    OpCost op{name, OpKind::gemm};
    op.flops = 2 * rows * cols * k;
    op.bytes = rows * k * kActivationBytes + weights * k * cols * weight_bytes() +
               rows * cols * kActivationBytes;
    bool selective = p.recompute == Recompute::selective;
    op.saved_bytes = rows * k * (selective ? double(dtype_size(p.gemm_dtype)) : kActivationBytes);
    // An input of width `hidden` is kept as its sequence-parallel shard and gathered again in
    // the backward.
    if (k == double(m.hidden)) op.saved_bytes /= p.tp;
    op.wgrad_flops = op.flops;
    op.dtype = p.gemm_dtype;
    op.rows = rows;
    op.groups = weights;
    ops.push_back(op);
  }

  void streaming(const std::string& name, OpKind kind, double elements_in, double elements_out,
                 double flops_per_element) {
    OpCost op{name, kind};
    op.flops = flops_per_element * elements_in;
    op.bytes = (elements_in + elements_out) * kActivationBytes;
    op.saved_bytes = p.recompute == Recompute::selective ? 0 : elements_in * kActivationBytes;
    op.dtype = DType::f32;  // norms and activations run on the vector units
    ops.push_back(op);
  }

  // Sequence parallelism splits the tokens of norms and the MoE block over tp.
  double sp_tokens() const { return pass.tokens / p.tp; }

  void attention_core(const std::string& name, double heads, double qk_dim, double v_dim,
                      double kv_bytes_read) {
    OpCost op{name, OpKind::attention};
    op.flops = 2 * pass.tokens * heads * (qk_dim + v_dim) * pass.context;
    op.bytes = pass.tokens * heads * (qk_dim + v_dim) * kActivationBytes + kv_bytes_read;
    // Q, K, V and O for the backward. Selective keeps only the softmax row statistics: O is
    // the output projection's saved input, Q, K and V come back from their projections.
    op.saved_bytes = p.recompute == Recompute::selective ? pass.tokens * heads * 4 : op.bytes;
    op.dtype = p.gemm_dtype == DType::f32 ? DType::f32 : DType::bf16;
    ops.push_back(op);
  }

  void kv_write(double bytes_per_token) {
    if (!pass.writes_kv) return;
    OpCost op{"attn.kv_cache_write", OpKind::elementwise};
    op.bytes = pass.tokens * bytes_per_token;
    op.dtype = DType::f32;
    ops.push_back(op);
  }

  void gqa_attention() {
    double heads = double(m.heads) / p.tp, kv_heads = std::max(1.0, double(m.kv_heads) / p.tp);
    double d = m.head_dim, T = pass.tokens;
    gemm("attn.q_proj", T, heads * d, m.hidden);
    gemm("attn.kv_proj", T, 2 * kv_heads * d, m.hidden);
    double kv_bytes = pass.kv_tokens * 2 * kv_heads * d * dtype_size(p.kv_dtype);
    attention_core("attn.core", heads, d, d, kv_bytes);
    kv_write(2 * kv_heads * d * dtype_size(p.kv_dtype));
    gemm("attn.o_proj", T, m.hidden, heads * d);
  }

  void mla_queries() {
    double heads = double(m.heads) / p.tp, T = pass.tokens;
    if (m.q_lora_rank > 0) {
      gemm("attn.q_a_proj", T, m.q_lora_rank, m.hidden);
      streaming("attn.q_a_norm", OpKind::norm, T * m.q_lora_rank, T * m.q_lora_rank, 4);
      gemm("attn.q_b_proj", T, heads * m.head_dim, m.q_lora_rank);
    } else {
      gemm("attn.q_proj", T, heads * m.head_dim, m.hidden);
    }
    gemm("attn.kv_a_proj", T, m.kv_lora_rank + m.qk_rope_dim, m.hidden);
    streaming("attn.kv_a_norm", OpKind::norm, T * m.kv_lora_rank, T * m.kv_lora_rank, 4);
  }

  // Training and prefill: the latent is expanded to per-head keys and values (kv_b_proj).
  void mla_attention() {
    double heads = double(m.heads) / p.tp, T = pass.tokens;
    mla_queries();
    gemm("attn.kv_b_proj", pass.kv_tokens, heads * (m.qk_nope_dim + m.v_head_dim),
         m.kv_lora_rank);
    double kv_bytes = pass.kv_tokens * heads * (m.head_dim + m.v_head_dim) * kActivationBytes;
    attention_core("attn.core", heads, m.head_dim, m.v_head_dim, kv_bytes);
    kv_write((m.kv_lora_rank + m.qk_rope_dim) * double(dtype_size(p.kv_dtype)));
    gemm("attn.o_proj", T, m.hidden, heads * m.v_head_dim);
  }

  // Decode: W_UK folds into the query and W_UV into the output, so attention runs over the
  // compressed cache (kv_lora_rank + rope per token, shared by all heads).
  void mla_absorbed_attention() {
    double heads = double(m.heads) / p.tp, T = pass.tokens;
    mla_queries();
    gemm("attn.q_absorb_uk", T * heads, m.kv_lora_rank, m.qk_nope_dim);
    double latent = m.kv_lora_rank + m.qk_rope_dim;
    double kv_bytes = pass.kv_tokens * latent * dtype_size(p.kv_dtype);
    attention_core("attn.core_latent", heads, latent, m.kv_lora_rank, kv_bytes);
    kv_write(latent * dtype_size(p.kv_dtype));
    gemm("attn.out_absorb_uv", T * heads, m.v_head_dim, m.kv_lora_rank);
    gemm("attn.o_proj", T, m.hidden, heads * m.v_head_dim);
  }

  void dense_mlp() {
    double T = pass.tokens, width = double(m.intermediate) / p.tp;
    gemm("mlp.gate_up_proj", T, 2 * width, m.hidden);
    streaming("mlp.swiglu", OpKind::elementwise, T * 2 * width, T * width, 4);
    gemm("mlp.down_proj", T, m.hidden, width);
  }

  void moe() {
    double T = sp_tokens(), h = m.hidden, width = m.moe_intermediate;
    gemm("moe.router", T, m.routed_experts, h);
    OpCost topk{"moe.topk_routing", OpKind::routing};
    topk.flops = T * m.routed_experts * 4;  // score, bias, group select, top-k compare
    topk.bytes = T * m.routed_experts * 4 * 2;
    topk.dtype = DType::f32;
    ops.push_back(topk);
    // The busiest device receives expert_load_imbalance x the average token-expert pairs; the
    // all-to-all and the expert GEMMs take as long as it does.
    double hot = p.expert_load_imbalance;
    for (OpCost& c : expert_all_to_all("moe.dispatch", m, hw, p, T * hot, p.dispatch_dtype))
      ops.push_back(c);
    double pairs = T * experts_per_token(m, p) * hot;
    double local_experts = std::ceil(experts_placed(m, p) / p.ep);
    double touched = std::min(local_experts, pairs);
    gemm("moe.experts_gate_up", pairs, 2 * width, h, touched);
    streaming("moe.experts_swiglu", OpKind::elementwise, pairs * 2 * width, pairs * width, 4);
    gemm("moe.experts_down", pairs, h, width, touched);
    if (!p.shared_expert_as_routed && m.shared_intermediate > 0) {
      gemm("moe.shared_gate_up", T, 2.0 * m.shared_intermediate, h);
      streaming("moe.shared_swiglu", OpKind::elementwise, T * 2 * m.shared_intermediate,
                T * m.shared_intermediate, 4);
      gemm("moe.shared_down", T, h, m.shared_intermediate);
    }
    for (OpCost& c : expert_all_to_all("moe.combine", m, hw, p, T * hot, p.combine_dtype))
      ops.push_back(c);
  }

  void tp_allreduce(const std::string& name) {
    if (p.tp > 1) ops.push_back(tensor_parallel_allreduce(name, hw, p, pass.tokens, m.hidden));
  }
};
}  // namespace

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::gemm: return "gemm";
    case OpKind::attention: return "attention";
    case OpKind::norm: return "norm";
    case OpKind::elementwise: return "elementwise";
    case OpKind::routing: return "routing";
    case OpKind::embedding: return "embedding";
    case OpKind::comm: return "comm";
  }
  return "?";
}

std::vector<OpCost> layer_ops(const ModelConfig& m, const HardwareSpec& hw,
                              const ParallelPlan& p, int64_t layer, const Pass& pass) {
  LayerBuilder b{m, hw, p, pass, {}};
  double sp = b.sp_tokens() * m.hidden;
  b.streaming("attn.input_norm", OpKind::norm, sp, sp, 4);
  if (!m.is_mla()) b.gqa_attention();
  else if (pass.absorbed) b.mla_absorbed_attention();
  else b.mla_attention();
  b.tp_allreduce("attn.tp_allreduce");
  b.streaming("mlp.post_attention_norm", OpKind::norm, sp, sp, 4);
  if (m.is_moe_layer(layer)) {
    b.moe();
  } else {
    b.dense_mlp();
    b.tp_allreduce("mlp.tp_allreduce");
  }
  return b.ops;
}

std::vector<OpCost> head_ops(const ModelConfig& m, const ParallelPlan& p, const Pass& pass,
                             bool training) {
  double T = pass.tokens, h = m.hidden, vocab = double(m.vocab) / p.tp;
  HardwareSpec none;
  LayerBuilder b{m, none, p, pass, {}};
  OpCost lookup{"embed.lookup", OpKind::embedding};
  lookup.bytes = 2 * T * h * kActivationBytes;  // gather a row, write it
  lookup.dtype = DType::f32;
  b.ops.push_back(lookup);
  b.streaming("head.final_norm", OpKind::norm, T * h, T * h, 4);
  b.gemm("head.lm_head", T, vocab, h);
  if (training) b.streaming("head.softmax_loss", OpKind::elementwise, T * vocab, 0, 5);
  return b.ops;
}

std::vector<OpCost> mtp_ops(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                            const Pass& pass, bool training) {
  LayerBuilder b{m, hw, p, pass, {}};
  double T = pass.tokens, h = m.hidden;
  b.streaming("mtp.norms", OpKind::norm, 2 * T * h, 2 * T * h, 4);
  b.gemm("mtp.projection", T, h, 2 * h);
  std::vector<OpCost> ops = b.ops;
  for (OpCost& op : layer_ops(m, hw, p, m.layers - 1, pass)) {
    op.name = "mtp." + op.name;
    ops.push_back(op);
  }
  for (OpCost& op : head_ops(m, p, pass, training)) {
    if (op.kind == OpKind::embedding) continue;  // shares the main model's embedding output
    op.name = "mtp." + op.name;
    ops.push_back(op);
  }
  return ops;
}

}  // namespace sol::model_detail
