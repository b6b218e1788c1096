// Decoding with the model's MTP module as the draft: each step verifies 1 + depth positions per
// sequence over one read of its KV cache and keeps 1 + a + ... + a^depth tokens.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "model_files.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol {
namespace {

using test::shipped;

std::string message_of(auto body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

Workload decode_workload(double acceptance) {
  Workload w = load_workload(shipped("workloads", "ep-decode-speed-limit"));
  w.mtp_decode = acceptance >= 0;
  w.mtp_acceptance = acceptance < 0 ? 0 : acceptance;
  return w;
}

std::map<std::string, OpRecord> decode_ops(const Prediction& p) {
  std::map<std::string, OpRecord> out;
  for (const OpRecord& r : p.ops)
    if (r.phase == "decode") out[r.name] = r;
  return out;
}

TEST(ModelMtpDecode, WorkloadKeyIsParsedAndChecked) {
  const char* head = R"({"name": "w", "kind": "inference", "prefill": {"batch": 1, "prompt_tokens": 8},
      "decode": {"batch": 4, "context_tokens": 16)";
  Workload w = parse_workload(std::string(head) + R"(, "mtp_acceptance": 0.85}})", "w.json");
  EXPECT_TRUE(w.mtp_decode);
  EXPECT_DOUBLE_EQ(w.tokens_per_decode_step(1), 1.85);
  EXPECT_DOUBLE_EQ(w.tokens_per_decode_step(2), 1 + 0.85 + 0.85 * 0.85);
  EXPECT_DOUBLE_EQ(parse_workload(std::string(head) + "}}", "w.json").tokens_per_decode_step(1), 1);
  std::string high = message_of([&] { parse_workload(std::string(head) + R"(, "mtp_acceptance": 1.5}})", "w.json"); });
  EXPECT_NE(high.find("w.json"), std::string::npos) << high;
  EXPECT_NE(high.find("mtp_acceptance"), std::string::npos) << high;
  EXPECT_NE(high.find("[0, 1]"), std::string::npos) << high;
  std::string negative = message_of([&] { parse_workload(std::string(head) + R"(, "mtp_acceptance": -0.1}})", "w.json"); });
  EXPECT_NE(negative.find("mtp_acceptance"), std::string::npos) << negative;
}

TEST(ModelMtpDecode, ModelWithoutMtpModulesIsRejected) {
  ModelConfig llama = load_model_config(shipped("models", "llama-3-70b"));
  HardwareSpec h100 = load_hardware_spec(shipped("hardware", "h100"));
  Workload w = load_workload(shipped("workloads", "chat-mtp"));
  ParallelPlan p;
  p.name = "eight";
  p.tp = 8;
  std::string what = message_of([&] { validate_plan(llama, h100, p, w); });
  EXPECT_NE(what.find("chat-mtp.json:"), std::string::npos) << what;  // file and line
  EXPECT_NE(what.find("key 'mtp_acceptance'"), std::string::npos) << what;
  EXPECT_NE(what.find("decode.mtp_acceptance"), std::string::npos) << what;
  EXPECT_NE(what.find("llama-3-70b has none"), std::string::npos) << what;
}

TEST(ModelMtpDecode, VerifyingTwoPositionsDoublesTokenWorkNotTheCacheRead) {
  ModelConfig v3 = load_model_config(shipped("models", "deepseek-v3"));
  HardwareSpec nvl = load_hardware_spec(shipped("hardware", "gb200-nvl72"));
  ParallelPlan plan = load_parallel_plan(shipped("plans", "deepseek-v3-decode-ep72-nvl72"));
  Prediction plain = predict(v3, nvl, plan, decode_workload(-1));
  Prediction mtp = predict(v3, nvl, plan, decode_workload(0.85));
  auto a = decode_ops(plain), b = decode_ops(mtp);
  // Two query positions per sequence: attention FLOPs and all-to-all bytes double ...
  EXPECT_NEAR(b.at("attn.core_latent").flops, 2 * a.at("attn.core_latent").flops, 1e-9 * b.at("attn.core_latent").flops);
  EXPECT_NEAR(b.at("moe.dispatch.scale_up").link_bytes, 2 * a.at("moe.dispatch.scale_up").link_bytes, 1);
  // ... while the latent cache is read once: the core's bytes grow by the query/output only.
  double cache = 64.0 * 4096 * 576 * 2 * 61;
  EXPECT_LT(b.at("attn.core_latent").bytes - a.at("attn.core_latent").bytes, 0.2 * cache);
  EXPECT_EQ(b.count("mtp.moe.experts_gate_up"), 1u);  // the module itself runs
  EXPECT_EQ(b.count("mtp.head.softmax_loss"), 0u);    // no loss when serving
  // TPOT = step / (1 + a); tokens/s counts every kept token.
  EXPECT_NEAR(mtp.tpot_s, mtp.step_s / 1.85, 1e-12);
  EXPECT_NEAR(mtp.tokens_per_s, 64.0 * plan.dp * 1.85 / mtp.step_s, 1e-6 * mtp.tokens_per_s);
  EXPECT_GT(mtp.step_s, plain.step_s);  // verification is not free
  EXPECT_LT(mtp.tpot_s, plain.tpot_s);  // but on NVLink it pays
  EXPECT_GT(mtp.memory.params, plain.memory.params);  // the module's weights
  EXPECT_EQ(mtp.memory.kv_cache, plain.memory.kv_cache);
  // With nothing accepted, drafting is pure cost.
  EXPECT_GT(predict(v3, nvl, plan, decode_workload(0)).tpot_s, plain.tpot_s);
}

}  // namespace
}  // namespace sol
