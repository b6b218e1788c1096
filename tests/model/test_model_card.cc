// The model card against arithmetic written out here from first principles: a small config
// counted by hand, DeepSeek-V3 from its config, and the figures DeepSeek published.
#include <gtest/gtest.h>

#include "model_files.h"
#include "sol/model.h"

namespace sol {
namespace {

const ModelCard::Part& part(const ModelCard& c, const std::string& name) {
  for (const ModelCard::Part& p : c.parts)
    if (p.name == name) return p;
  static ModelCard::Part none;
  ADD_FAILURE() << "no part " << name;
  return none;
}

// hidden 8, 2 layers, 2 query heads and 1 KV head of 4, MLP 16, vocabulary 10, untied.
TEST(ModelCard, SmallDenseConfigCountedByHand) {
  ModelConfig m = parse_model_config(R"({"name": "tiny", "source": "test",
      "hidden_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
      "num_key_value_heads": 1, "head_dim": 4, "intermediate_size": 16, "vocab_size": 10})",
                                     "tiny");
  ModelCard c = model_card(m, 5, 7);
  const double attention = 8 * (2 * 4) * 2 + 2 * 8 * (1 * 4);  // q and o; k and v
  const double mlp = 3 * 8 * 16;
  EXPECT_EQ(attention, 192);
  EXPECT_EQ(part(c, "attention (GQA)").total, 2 * attention);
  EXPECT_EQ(part(c, "dense MLP").per_layer, mlp);
  EXPECT_EQ(part(c, "embedding").total, 80);
  EXPECT_EQ(part(c, "LM head").total, 80);
  EXPECT_EQ(c.total_params, 2 * (attention + mlp) + 160);  // 1312
  EXPECT_EQ(c.active_params, c.total_params);
  EXPECT_EQ(c.mtp_params, 0);
  EXPECT_EQ(c.kv_bytes_per_token, 2 /*layers*/ * 2 /*K,V*/ * 1 * 4 * 2 /*bf16*/);
  // Forward FLOPs of one token: 2 x weights of each GEMM, plus attention 2 * heads * (d + d)
  // per key; causal at seq_len 5 averages (5 + 1) / 2 = 3 keys, non-causal 5.
  auto forward = [&](double keys) {
    return 2 * (2 * (attention + mlp) + 80) + 2 * 2.0 * 2 * (4 + 4) * keys;
  };
  EXPECT_EQ(c.train_flops_causal, 3 * forward(3));      // 7968
  EXPECT_EQ(c.train_flops_non_causal, 3 * forward(5));  // 8352
  EXPECT_EQ(c.decode_flops, forward(7));                // 2912 at context 7
}

TEST(ModelCard, DeepSeekV3FromItsConfigAndThePublishedTotals) {
  ModelCard c = model_card(load_model_config(test::shipped("models", "deepseek-v3")), 4096, 4096);
  const double h = 7168, heads = 128, vocab = 129280;
  const double attention = h * 1536 + 1536 * heads * (128 + 64)  // q down, q up
                           + h * (512 + 64)                       // kv down + rope key
                           + 512 * heads * (128 + 128)            // k and v up
                           + heads * 128 * h;                     // o
  const double expert = 3 * h * 2048, dense_mlp = 3 * h * 18432, router = h * 256;
  const double moe_layer = attention + 256 * expert + expert + router;
  const double total = 58 * moe_layer + 3 * (attention + dense_mlp) + 2 * vocab * h;
  const double active = 58 * (attention + 8 * expert + expert + router) +
                        3 * (attention + dense_mlp) + 2 * vocab * h;
  EXPECT_DOUBLE_EQ(c.total_params, total);
  EXPECT_DOUBLE_EQ(c.active_params, active);
  EXPECT_DOUBLE_EQ(part(c, "routed experts").per_layer, 256 * expert);
  EXPECT_EQ(part(c, "routed experts").layers, 58);
  EXPECT_EQ(part(c, "dense MLP").layers, 3);
  EXPECT_DOUBLE_EQ(c.mtp_params, 2 * h * h + moe_layer);
  // Technical report (arXiv:2412.19437): 671B total within 0.1%; "37B activated" is rounded
  // down from 37.55B (norm weights, a few million, are not counted here).
  EXPECT_NEAR(c.total_params / 671e9, 1, 0.001);
  EXPECT_NEAR(c.active_params / 37e9, 1, 0.02);
  EXPECT_DOUBLE_EQ(c.kv_bytes_per_token, 61 * (512 + 64) * 2.0);
  // ISCA 2025 table 2: 250 GFLOPs per training token at 4096, causal; non-causal adds the
  // masked half of the attention scores.
  EXPECT_NEAR(c.train_flops_causal / 250e9, 1, 0.01);
  double attention_per_key = 3 * 2 * 61 * heads * (192 + 128);
  EXPECT_NEAR(c.train_flops_non_causal - c.train_flops_causal,
              attention_per_key * (4096 - 4097 / 2.0), 1e-9 * c.train_flops_causal);
  // Decode at 4096: the absorbed latent attention reads 576 values per key and writes 512 per
  // head; the projections add their weights x 2 plus the absorb GEMMs (128 heads x 128 x 512 x 2).
  double decode_attention = 2 * 61 * heads * (576 + 512) * 4096.0;
  double absorb = 61 * 2 * (2 * heads * 128 * 512.0);
  double absorbed_weights = active - 61 * 512 * heads * (128 + 128) - vocab * h;  // kv_b folded
  EXPECT_NEAR(c.decode_flops, 2 * absorbed_weights + absorb + decode_attention,
              1e-9 * c.decode_flops);
}

TEST(ModelCard, TiedEmbeddingsHaveNoHead) {
  ModelCard c = model_card(load_model_config(test::shipped("models", "llama-3.2-1b")), 2048, 0);
  for (const ModelCard::Part& p : c.parts) EXPECT_NE(p.name, "LM head");
  EXPECT_GT(c.total_params, 1.2e9);
  EXPECT_LT(c.total_params, 1.3e9);
}

}  // namespace
}  // namespace sol
