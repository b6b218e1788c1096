// Model configs in the Hugging Face config.json vocabulary. A real config.json loads as is:
// the keys that describe the file but not the arithmetic (token ids, rope, dropout, ...) are
// accepted and ignored; anything else unknown is an error (a typo must not pass silently).
#include "model/param_count.h"
#include "model/strict_json.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol {

namespace {
using model_json::Fields;

void read_attention(Fields& f, ModelConfig& m) {
  m.heads = f.integer("num_attention_heads");
  m.kv_heads = f.integer_or("num_key_value_heads", m.heads, 1);
  check(m.heads % m.kv_heads == 0, f.where(), "num_attention_heads = ",
        m.heads, " is not a multiple of num_key_value_heads = ", m.kv_heads);
  m.kv_lora_rank = f.integer_or("kv_lora_rank", 0);
  if (m.is_mla()) {
    m.q_lora_rank = f.integer_or("q_lora_rank", 0);  // null: queries are not compressed
    m.qk_nope_dim = f.integer("qk_nope_head_dim");
    m.qk_rope_dim = f.integer("qk_rope_head_dim");
    m.v_head_dim = f.integer("v_head_dim");
    m.head_dim = m.qk_nope_dim + m.qk_rope_dim;
    f.accept({"head_dim"});
  } else {
    m.head_dim = f.integer_or("head_dim", m.hidden / m.heads, 1);
  }
}

void read_experts(Fields& f, ModelConfig& m) {
  // DeepSeek says n_routed_experts, Qwen-MoE num_experts, Mixtral num_local_experts.
  for (const char* key : {"n_routed_experts", "num_experts", "num_local_experts"})
    if (f.has(key)) m.routed_experts = f.integer(key);
  f.accept({"n_routed_experts", "num_experts", "num_local_experts"});
  if (!m.is_moe()) {
    f.accept({"num_experts_per_tok", "moe_intermediate_size"});
    return;
  }
  m.experts_per_token = f.integer("num_experts_per_tok");
  // Mixtral's experts are full-size MLPs: intermediate_size is the expert's width.
  m.moe_intermediate = f.integer_or("moe_intermediate_size", m.intermediate, 1);
  m.shared_experts = f.integer_or("n_shared_experts", 0);
  m.shared_intermediate = m.shared_experts * m.moe_intermediate;
  if (f.has("shared_expert_intermediate_size")) {  // Qwen2-MoE: one shared MLP of this width
    m.shared_intermediate = f.integer("shared_expert_intermediate_size", 0);
    m.shared_experts = m.shared_intermediate > 0 ? 1 : 0;
  }
  f.accept({"shared_expert_intermediate_size"});
  m.first_dense_layers = f.integer_or("first_k_dense_replace", 0);
  m.moe_layer_freq = f.integer_or("moe_layer_freq", 1, 1);
  int64_t sparse_step = f.integer_or("decoder_sparse_step", 1, 1);
  if (sparse_step != 1) f.fail_key("decoder_sparse_step", "1 (every layer MoE)");
  if (f.has("mlp_only_layers") && !f.is_empty_list("mlp_only_layers"))
    f.fail_key("mlp_only_layers", "an empty list");
  f.accept({"mlp_only_layers"});
  m.expert_groups = f.integer_or("n_group", 0);
  m.groups_per_token = f.integer_or("topk_group", 0);
  check(m.experts_per_token <= m.routed_experts, f.where(), "num_experts_per_tok = ",
        m.experts_per_token, " exceeds the ", m.routed_experts, " routed experts");
}
}  // namespace

ModelConfig parse_model_config(const std::string& text, const std::string& origin) {
  nlohmann::json doc = model_json::parse_document(text, origin);
  Fields f(doc, origin);
  ModelConfig m;
  m.name = f.text("name");
  m.source = f.text("source");
  m.hidden = f.integer("hidden_size");
  m.layers = f.integer("num_hidden_layers");
  m.intermediate = f.integer("intermediate_size");
  m.vocab = f.integer("vocab_size");
  m.tied_embeddings = f.boolean_or("tie_word_embeddings", false);
  read_attention(f, m);
  read_experts(f, m);
  m.mtp_layers = f.integer_or("num_nextn_predict_layers", 0);
  f.accept({"architectures", "model_type", "torch_dtype", "transformers_version", "bos_token_id",
            "eos_token_id", "pad_token_id", "hidden_act", "initializer_range",
            "max_position_embeddings", "max_window_layers", "rms_norm_eps", "rope_theta",
            "rope_scaling", "use_cache", "attention_bias", "attention_dropout", "mlp_bias",
            "pretraining_tp", "aux_loss_alpha", "router_aux_loss_coef", "output_router_logits",
            "norm_topk_prob", "routed_scaling_factor", "scoring_func", "seq_aux", "topk_method",
            "ep_size", "quantization_config", "auto_map", "sliding_window",
            "use_sliding_window", "router_jitter_noise", "qkv_bias"});
  f.finish();
  return m;
}

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return is_moe() && layer >= first_dense_layers && layer % moe_layer_freq == 0;
}

int64_t ModelConfig::moe_layer_count() const {
  int64_t n = 0;
  for (int64_t l = 0; l < layers; ++l) n += is_moe_layer(l) ? 1 : 0;
  return n;
}


using model_detail::attention_params;
using model_detail::embedding_params;
using model_detail::mlp_params;

double ModelConfig::total_params() const {
  double moe = moe_layer_count(), dense = layers - moe;
  double per_moe = attention_params(*this) + routed_experts * mlp_params(*this, moe_intermediate) +
                   mlp_params(*this, shared_intermediate) + double(hidden) * routed_experts;
  double per_dense = attention_params(*this) + mlp_params(*this, intermediate);
  return moe * per_moe + dense * per_dense + embedding_params(*this);
}

double ModelConfig::activated_params() const {
  double moe = moe_layer_count(), dense = layers - moe;
  double per_moe = attention_params(*this) +
                   experts_per_token * mlp_params(*this, moe_intermediate) +
                   mlp_params(*this, shared_intermediate) + double(hidden) * routed_experts;
  double per_dense = attention_params(*this) + mlp_params(*this, intermediate);
  return moe * per_moe + dense * per_dense + embedding_params(*this);
}

}  // namespace sol
