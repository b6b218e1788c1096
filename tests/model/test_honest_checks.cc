// Plans and workloads that do not apply to the model fail with the file, line and key; what
// the model reports (MTP memory, decode MFU, the training breakdown, serving per node) follows
// its definition.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "model/accounting.h"
#include "model_files.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol {
namespace {

using test::expect_error;
using test::shipped;

ModelConfig v3() { return load_model_config(shipped("models", "deepseek-v3")); }
HardwareSpec h800() { return load_hardware_spec(shipped("hardware", "h800")); }
Workload chat() { return load_workload(shipped("workloads", "chat")); }

ParallelPlan ep_plan(int ep, int redundant = 0) {
  std::string text = "{\"name\": \"ep\",\n \"devices\": " + std::to_string(ep) +
                     ",\n \"dp\": " + std::to_string(ep) + ",\n \"ep\": " + std::to_string(ep) +
                     ",\n \"redundant_experts\": " + std::to_string(redundant) + "}";
  return parse_parallel_plan(text, "plans/ep.json");
}

TEST(HonestChecks, ExpertParallelismMustDivideTheExpertsPlaced) {
  EXPECT_NO_THROW(validate_plan(v3(), h800(), ep_plan(64), chat()));
  expect_error([] { validate_plan(v3(), h800(), ep_plan(48), chat()); },
               {"plans/ep.json:4 key 'ep'", "ep = 48 does not divide the 256 experts placed",
                "redundant_experts"});
  expect_error([] { validate_plan(v3(), h800(), ep_plan(512), chat()); },
               {"plans/ep.json:4 key 'ep'", "ep = 512 exceeds the 256 experts placed"});
  // Redundant copies fill the devices, as DeepSeek's 320-GPU decode deployment does.
  EXPECT_NO_THROW(validate_plan(v3(), h800(), ep_plan(320, 64), chat()));
  EXPECT_NO_THROW(validate_plan(v3(), h800(),
                                load_parallel_plan(shipped("plans", "deepseek-v3-decode-ep320-h800")),
                                chat()));
  ModelConfig llama = load_model_config(shipped("models", "llama-3-70b"));
  expect_error([&] { validate_plan(llama, h800(), ep_plan(8), chat()); },
               {"plans/ep.json:4 key 'ep'", "has no experts"});
}

TEST(HonestChecks, MultiTokenPredictionNeedsAModelWithIt) {
  ModelConfig llama = load_model_config(shipped("models", "llama-3-70b"));
  ParallelPlan plan = load_parallel_plan(shipped("plans", "llama-3-70b-train-h100"));
  Workload w = parse_workload(R"({"name": "mtp",
  "kind": "training", "seq_len": 4096,
  "global_batch": 256,
  "mtp": true})", "workloads/mtp.json");
  expect_error([&] { validate_plan(llama, h800(), plan, w); },
               {"workloads/mtp.json:4 key 'mtp'", "num_nextn_predict_layers", "llama-3-70b"});
  Workload decode = parse_workload(R"({"name": "d", "kind": "inference",
      "decode": {"batch": 8, "context_tokens": 1024,
                 "mtp_acceptance": 0.8}})", "workloads/d.json");
  expect_error([&] { validate_plan(llama, h800(), ep_plan(1), decode); },
               {"workloads/d.json:3 key 'mtp_acceptance'", "MTP modules"});
}

TEST(HonestChecks, AMissingDpIsNamed) {
  expect_error([] {
    parse_parallel_plan(R"({"name": "x", "devices": 16, "tp": 8})", "plans/x.json");
  }, {"plans/x.json", "missing key 'dp'", "devices / (tp x pp) = 2"});
  // Where dp is 1, it may be left out.
  EXPECT_EQ(parse_parallel_plan(R"({"name": "x", "devices": 8, "tp": 8})", "p").dp, 1);
  // A count that does not divide is still the product check's message.
  expect_error([] { parse_parallel_plan(R"({"name": "x", "devices": 12, "tp": 8})", "plans/x.json"); },
               {"dp x tp x pp = 1 x 8 x 1 = 8 but devices = 12"});
}

TEST(HonestChecks, TrainingMtpModulesTakeMemory) {
  ParallelPlan plan = load_parallel_plan(shipped("plans", "deepseek-v3-train-h800"));
  Workload plain = load_workload(shipped("workloads", "pretrain-4k"));
  Workload mtp = load_workload(shipped("workloads", "pretrain-4k-mtp"));
  MemoryUse a = model_detail::memory_per_device(v3(), h800(), plan, plain);
  MemoryUse b = model_detail::memory_per_device(v3(), h800(), plan, mtp);
  // The last stage also holds the MTP module: its projection, attention, shared expert and
  // router (dense, /tp = 1) and 256 / ep = 4 routed experts, in bf16, x 2 for DualPipe.
  const double h = 7168, expert = 3 * h * 2048;
  const double attention = h * 1536 + 1536 * 128 * 192.0 + h * 576 + 512 * 128 * 256.0 + 128 * 128 * h;
  const double dense = 2 * h * h + attention + expert + h * 256, routed = 4 * expert;
  EXPECT_NEAR(b.params - a.params, 2 * 2 * (dense + routed), 1e-6 * dense);
  // ZeRO-1 shards the optimizer over the replicas: dp = 128 for dense weights, dp x tp / ep = 2
  // for the experts.
  EXPECT_NEAR(b.optimizer - a.optimizer, 2 * 12 * (dense / 128 + routed / 2), 1e-6 * dense);
  EXPECT_GT(b.activations, a.activations);
}

TEST(HonestChecks, DecodeMfuIsFlopsPerTokenTimesTokensPerSecondOverPeak) {
  ParallelPlan plan = load_parallel_plan(shipped("plans", "deepseek-v3-decode-ep72-nvl72"));
  HardwareSpec gb200 = load_hardware_spec(shipped("hardware", "gb200-nvl72"));
  for (const char* name : {"chat", "chat-mtp"}) {
    Workload w = load_workload(shipped("workloads", name));
    Prediction r = predict(v3(), gb200, plan, w);
    double per_token = decode_flops_per_token(v3(), w.context_tokens);
    double tokens_per_s_per_device = double(w.decode_batch) * plan.dp / r.tpot_s / plan.devices();
    EXPECT_NEAR(r.tokens_per_s_per_device, tokens_per_s_per_device, 1e-9 * tokens_per_s_per_device);
    EXPECT_NEAR(r.mfu, per_token * tokens_per_s_per_device / gb200.flops_fp8, 1e-12) << name;
  }
}

TEST(HonestChecks, TrainingBreakdownAddsUpToTheStep) {
  Prediction r = predict(v3(), h800(), load_parallel_plan(shipped("plans", "deepseek-v3-train-h800")),
                         load_workload(shipped("workloads", "pretrain-4k")));
  const Prediction::Training& t = r.training;
  EXPECT_NEAR(t.body_s + t.bubble_s + t.grad_sync_s + t.optimizer_s, r.step_s, 1e-9 * r.step_s);
  EXPECT_NEAR(t.backward_input_s + t.backward_weight_s, r.pipeline.b_s, 1e-12);
  EXPECT_DOUBLE_EQ(t.forward_s, r.pipeline.f_s);
  EXPECT_DOUBLE_EQ(t.body_s, 120 * r.pipeline.fb_s);  // DualPipe's steady state: F&B pairs
  EXPECT_GT(t.backward_weight_s, 0);
  EXPECT_DOUBLE_EQ(t.tokens_per_day_per_device, r.tokens_per_s_per_device * 86400);
  EXPECT_DOUBLE_EQ(t.mfu_fp8_causal, r.mfu);  // the plan's GEMMs are FP8
  EXPECT_NEAR(t.mfu_bf16_causal, 2 * t.mfu_fp8_causal, 1e-3 * t.mfu_bf16_causal);
  EXPECT_GT(t.mfu_fp8_non_causal, t.mfu_fp8_causal);
}

TEST(HonestChecks, PrefillOnlyAndDecodeOnlyServing) {
  ParallelPlan plan = load_parallel_plan(shipped("plans", "deepseek-v3-decode-ep320-h800"));
  Workload prefill = parse_workload(R"({"name": "p", "kind": "inference",
      "prefill": {"batch": 4, "prompt_tokens": 4096}})", "p");
  Workload decode = parse_workload(R"({"name": "d", "kind": "inference",
      "decode": {"batch": 64, "context_tokens": 4096}})", "d");
  Prediction p = predict(v3(), h800(), plan, prefill), d = predict(v3(), h800(), plan, decode);
  ASSERT_EQ(p.phases.size(), 1u);
  EXPECT_EQ(p.phases[0].name, "prefill");
  ASSERT_EQ(d.phases.size(), 1u);
  EXPECT_EQ(d.phases[0].name, "decode");
  EXPECT_NEAR(p.serving.prefill_tokens_per_s, 4.0 * 4096 * 320 / p.ttft_s, 1e-6);
  EXPECT_NEAR(p.serving.prefill_tokens_per_s_per_node, p.serving.prefill_tokens_per_s / 40, 1e-6);
  EXPECT_NEAR(d.serving.decode_tokens_per_s_per_node, 64.0 * 320 / d.tpot_s / 40, 1e-6);
  EXPECT_GT(p.mfu, 0);
  // The same phases as the full chat workload's.
  Prediction both = predict(v3(), h800(), plan, chat());
  EXPECT_NEAR(d.tpot_s, both.tpot_s, 1e-12);
  expect_error([] { parse_workload(R"({"name": "n", "kind": "inference"})", "w.json"); },
               {"w.json", "prefill", "decode section"});
}

}  // namespace
}  // namespace sol
