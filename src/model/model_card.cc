// The model card: weights per part, totals, KV cache and FLOPs per token, from the config alone.
#include <nlohmann/json.hpp>

#include "model/param_count.h"
#include "model/text_format.h"
#include "sol/model.h"

namespace sol {

using namespace model_detail;

ModelCard model_card(const ModelConfig& m, int64_t seq_len, int64_t context) {
  ModelCard c;
  c.model = m.name;
  int64_t moe = m.moe_layer_count(), dense = m.layers - moe;
  auto part = [&](const std::string& name, double per_layer, int64_t layers, double active) {
    if (per_layer > 0 && layers > 0)
      c.parts.push_back({name, per_layer, layers, per_layer * double(layers),
                         active * double(layers)});
  };
  double vocab_rows = double(m.vocab) * m.hidden;
  part("embedding", vocab_rows, 1, vocab_rows);
  part(m.is_mla() ? "attention (MLA)" : "attention (GQA)", attention_params(m), m.layers,
       attention_params(m));
  part("dense MLP", mlp_params(m, double(m.intermediate)), dense, mlp_params(m, m.intermediate));
  if (m.is_moe()) {
    double expert = mlp_params(m, double(m.moe_intermediate));
    part("router", router_params(m), moe, router_params(m));
    part("routed experts", expert * m.routed_experts, moe, expert * m.experts_per_token);
    part("shared experts", mlp_params(m, double(m.shared_intermediate)), moe,
         mlp_params(m, double(m.shared_intermediate)));
  }
  if (!m.tied_embeddings) part("LM head", vocab_rows, 1, vocab_rows);
  for (const ModelCard::Part& p : c.parts) {
    c.total_params += p.total;
    c.active_params += p.active;
  }
  if (m.mtp_layers > 0) {
    part("MTP modules (excluded)", mtp_module_params(m, false), m.mtp_layers,
         mtp_module_params(m, true));
    c.mtp_params = c.parts.back().total;
  }
  c.kv_bytes_per_token = kv_cache_bytes_per_token(m, DType::bf16);
  c.seq_len = seq_len;
  c.context = context;
  c.train_flops_causal = training_flops_per_token(m, seq_len, false, true);
  c.train_flops_non_causal = training_flops_per_token(m, seq_len, false, false);
  if (m.mtp_layers > 0) c.train_flops_causal_mtp = training_flops_per_token(m, seq_len, true, true);
  c.decode_flops = decode_flops_per_token(m, context);
  return c;
}

std::string model_card_table(const ModelCard& c) {
  using model_text::format;
  std::string out = format("model %s\n\n%-24s %14s %7s %14s %14s\n", c.model.c_str(), "part",
                           "per layer", "layers", "total", "active/token");
  auto row = [&](const ModelCard::Part& p) {
    out += format("%-24s %13.4fB %7lld %13.4fB %13.4fB\n", p.name.c_str(), p.per_layer / 1e9,
                  static_cast<long long>(p.layers), p.total / 1e9, p.active / 1e9);
  };
  size_t main_parts = c.parts.size() - (c.mtp_params > 0 ? 1 : 0);  // MTP is last when present
  for (size_t i = 0; i < main_parts; ++i) row(c.parts[i]);
  out += format("%-24s %14s %7s %13.4fB %13.4fB\n", "total (MTP excluded)", "", "",
                c.total_params / 1e9, c.active_params / 1e9);
  if (main_parts < c.parts.size()) row(c.parts.back());
  out += format("\nKV cache per token (bf16, all layers): %.3f KB\n", c.kv_bytes_per_token / 1e3);
  out += format("training FLOPs per token at seq_len %lld (forward + backward, matrix work):\n"
                "  causal %.1f GFLOP, non-causal %.1f GFLOP", static_cast<long long>(c.seq_len),
                c.train_flops_causal / 1e9, c.train_flops_non_causal / 1e9);
  if (c.train_flops_causal_mtp > 0)
    out += format(", causal with MTP %.1f GFLOP", c.train_flops_causal_mtp / 1e9);
  out += format("\ndecode FLOPs per token at context %lld (forward): %.2f GFLOP\n",
                static_cast<long long>(c.context), c.decode_flops / 1e9);
  return out;
}

std::string model_card_json(const ModelCard& c) {
  using nlohmann::json;
  json parts = json::array();
  for (const ModelCard::Part& p : c.parts)
    parts.push_back({{"part", p.name}, {"per_layer", p.per_layer}, {"layers", p.layers},
                     {"total", p.total}, {"active", p.active}});
  json out = {{"model", c.model}, {"parts", parts}, {"total_params", c.total_params},
              {"active_params", c.active_params}, {"mtp_params", c.mtp_params},
              {"kv_bytes_per_token_bf16", c.kv_bytes_per_token}, {"seq_len", c.seq_len},
              {"context", c.context}, {"train_flops_per_token_causal", c.train_flops_causal},
              {"train_flops_per_token_non_causal", c.train_flops_non_causal},
              {"train_flops_per_token_causal_mtp", c.train_flops_causal_mtp},
              {"decode_flops_per_token", c.decode_flops}};
  return out.dump(2);
}

}  // namespace sol
