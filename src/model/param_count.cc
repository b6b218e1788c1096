#include "model/param_count.h"

namespace sol::model_detail {

double attention_params(const ModelConfig& m) {
  double h = m.hidden, heads = m.heads;
  if (!m.is_mla()) return h * heads * m.head_dim * 2 + 2.0 * h * m.kv_heads * m.head_dim;
  double q = m.q_lora_rank > 0 ? h * m.q_lora_rank + double(m.q_lora_rank) * heads * m.head_dim
                               : h * heads * m.head_dim;
  double kv = h * (m.kv_lora_rank + m.qk_rope_dim) +
              double(m.kv_lora_rank) * heads * (m.qk_nope_dim + m.v_head_dim);
  return q + kv + heads * m.v_head_dim * h;
}

double embedding_params(const ModelConfig& m) {
  return double(m.vocab) * m.hidden * (m.tied_embeddings ? 1 : 2);
}

double mtp_module_params(const ModelConfig& m, bool active) {
  double projection = 2.0 * m.hidden * m.hidden;
  double mlp = m.is_moe() ? (active ? m.experts_per_token : m.routed_experts) *
                                    mlp_params(m, m.moe_intermediate) +
                                mlp_params(m, m.shared_intermediate) + router_params(m)
                          : mlp_params(m, m.intermediate);
  return projection + attention_params(m) + mlp;
}

}  // namespace sol::model_detail
