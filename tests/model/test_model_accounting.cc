// Per-operator accounting against hand-derived counts on small and real shapes.
#include <gtest/gtest.h>

#include <map>

#include "model/accounting.h"
#include "model_files.h"
#include "sol/error.h"

namespace sol {
namespace {

using model_detail::OpCost;
using test::shipped;

std::map<std::string, OpCost> by_name(const std::vector<OpCost>& ops) {
  std::map<std::string, OpCost> out;
  for (const OpCost& op : ops) out[op.name] = op;
  return out;
}

HardwareSpec test_device() {
  HardwareSpec hw;
  hw.name = "test";
  hw.flops_bf16 = 1e15;
  hw.flops_fp8 = 2e15;
  hw.flops_f32 = 1e14;
  hw.memory_bandwidth = 4e12;
  hw.memory_bytes = 1e12;
  hw.scale_up_size = 8;
  hw.scale_up_bandwidth = 400e9;
  hw.scale_out_bandwidth = 50e9;
  return hw;
}

TEST(ModelAccounting, GqaLayerGemmsAndCausalAttention) {
  ModelConfig m = load_model_config(shipped("models", "llama-3-70b"));
  ParallelPlan p;
  p.tp = 8;
  model_detail::Pass pass;
  pass.tokens = 4096;
  pass.context = (4096 + 1) / 2.0;
  pass.kv_tokens = 4096;
  auto ops = by_name(model_detail::layer_ops(m, test_device(), p, 0, pass));
  // q: 4096 x (64/8 heads x 128) x 8192; kv: 2 x 1 kv head x 128.
  EXPECT_DOUBLE_EQ(ops["attn.q_proj"].flops, 2.0 * 4096 * 8 * 128 * 8192);
  EXPECT_DOUBLE_EQ(ops["attn.kv_proj"].flops, 2.0 * 4096 * 2 * 128 * 8192);
  EXPECT_DOUBLE_EQ(ops["attn.core"].flops, 2.0 * 4096 * 8 * (128 + 128) * 2048.5);
  EXPECT_DOUBLE_EQ(ops["mlp.gate_up_proj"].flops, 2.0 * 4096 * 2 * 28672 / 8 * 8192);
  // Two all-reduces of 4096 x 8192 bf16 over 8 ranks: 2 (n-1)/n of the tensor each.
  EXPECT_DOUBLE_EQ(ops["attn.tp_allreduce"].link_bytes, 2 * 7.0 / 8 * 4096 * 8192 * 2);
  EXPECT_EQ(ops["mlp.tp_allreduce"].link, Link::scale_up);
}

TEST(ModelAccounting, MlaAbsorbedDecodeReadsTheLatentCacheOnce) {
  ModelConfig m = load_model_config(shipped("models", "deepseek-v3"));
  ParallelPlan p;
  model_detail::Pass pass;
  pass.tokens = 32;
  pass.context = 4096;
  pass.kv_tokens = 32 * 4096;
  pass.absorbed = true;
  pass.writes_kv = true;
  auto ops = by_name(model_detail::layer_ops(m, test_device(), p, 10, pass));
  const OpCost& core = ops.at("attn.core_latent");
  // Scores over kv_lora + rope = 576 dims, values over the 512-dim latent, 128 heads.
  EXPECT_DOUBLE_EQ(core.flops, 2.0 * 32 * 128 * (576 + 512) * 4096);
  double cache = 32.0 * 4096 * 576 * 2;
  EXPECT_GE(core.bytes, cache);
  EXPECT_LT(core.bytes, cache * 1.1);
  EXPECT_EQ(ops.count("attn.kv_b_proj"), 0u);  // absorbed: no per-head expansion
  EXPECT_DOUBLE_EQ(ops.at("attn.q_absorb_uk").flops, 2.0 * 32 * 128 * 512 * 128);
  EXPECT_DOUBLE_EQ(ops.at("attn.kv_cache_write").bytes, 32.0 * 576 * 2);
}

TEST(ModelAccounting, NodeLimitedDispatchCrossesAtMostFourNodes) {
  ModelConfig m = load_model_config(shipped("models", "deepseek-v3"));
  HardwareSpec hw = test_device();
  ParallelPlan p;
  p.dp = 64;
  p.ep = 64;  // 8 nodes of 8
  p.node_limited_routing = true;
  auto limited = by_name(model_detail::expert_all_to_all("d", m, hw, p, 1000, DType::f8e4m3));
  // 4 target nodes, the home node among them with probability 4/8: 3.5 crossings per token.
  EXPECT_DOUBLE_EQ(limited.at("d.scale_out").link_bytes, 1000 * 3.5 * 7168);
  EXPECT_DOUBLE_EQ(limited.at("d.scale_up").link_bytes, 1000 * 8 * 7.0 / 8 * 7168);
  p.node_limited_routing = false;
  auto free = by_name(model_detail::expert_all_to_all("d", m, hw, p, 1000, DType::f8e4m3));
  EXPECT_DOUBLE_EQ(free.at("d.scale_out").link_bytes, 1000 * 8 * 56.0 / 64 * 7168);
  p.ep = 1;
  EXPECT_TRUE(model_detail::expert_all_to_all("d", m, hw, p, 1000, DType::bf16).empty());
}

TEST(ModelAccounting, ExpertLoadImbalanceScalesTheBusiestDevicesExpertWork) {
  ModelConfig m = load_model_config(shipped("models", "deepseek-v3"));
  HardwareSpec hw = test_device();
  ParallelPlan p;
  p.dp = p.ep = 64;
  model_detail::Pass pass;
  pass.tokens = 4096;
  pass.context = 2048.5;
  pass.kv_tokens = 4096;
  auto even = by_name(model_detail::layer_ops(m, hw, p, 10, pass));
  p.expert_load_imbalance = 1.25;
  auto hot = by_name(model_detail::layer_ops(m, hw, p, 10, pass));
  for (const char* name : {"moe.experts_gate_up", "moe.experts_down"})
    EXPECT_DOUBLE_EQ(hot.at(name).flops, 1.25 * even.at(name).flops) << name;
  for (const char* name : {"moe.dispatch.scale_out", "moe.combine.scale_up"})
    EXPECT_DOUBLE_EQ(hot.at(name).link_bytes, 1.25 * even.at(name).link_bytes) << name;
  for (const char* name : {"moe.router", "moe.shared_gate_up", "attn.o_proj"})
    EXPECT_DOUBLE_EQ(hot.at(name).flops, even.at(name).flops) << name;

  ParallelPlan file = parse_parallel_plan(R"({"name": "p", "devices": 8, "dp": 8, "ep": 8,
      "expert_load_imbalance": 1.5})", "p.json");
  EXPECT_DOUBLE_EQ(file.expert_load_imbalance, 1.5);
  try {
    parse_parallel_plan(R"({"name": "p", "devices": 8, "dp": 8, "expert_load_imbalance": 0.8})", "p.json");
    ADD_FAILURE() << "expected sol::Error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("p.json"), std::string::npos) << what;
    EXPECT_NE(what.find("expert_load_imbalance"), std::string::npos) << what;
    EXPECT_NE(what.find(">= 1"), std::string::npos) << what;
  }
  ParallelPlan dense;
  dense.name = "dense";
  dense.expert_load_imbalance = 1.2;
  EXPECT_THROW(validate_plan(load_model_config(shipped("models", "llama-3-70b")), hw, dense,
                             load_workload(shipped("workloads", "chat"))),
               Error);

  // DeepSeek-V3's training step: a 20% hotter device makes the step longer, useful work the same.
  ParallelPlan v3plan = load_parallel_plan(shipped("plans", "deepseek-v3-train-h800"));
  Workload w = load_workload(shipped("workloads", "pretrain-4k"));
  HardwareSpec h800 = load_hardware_spec(shipped("hardware", "h800"));
  Prediction balanced = predict(m, h800, v3plan, w);
  v3plan.expert_load_imbalance = 1.2;
  Prediction skewed = predict(m, h800, v3plan, w);
  EXPECT_GT(skewed.step_s, balanced.step_s * 1.05);
  EXPECT_LT(skewed.step_s, balanced.step_s * 1.2);
  EXPECT_DOUBLE_EQ(skewed.model_flops_per_token, balanced.model_flops_per_token);
}

TEST(ModelAccounting, ZeroShardsOptimizerThenGradientsThenWeights) {
  ModelConfig m = load_model_config(shipped("models", "llama-3-70b"));
  HardwareSpec hw = test_device();
  Workload w;
  w.seq_len = 4096;
  w.global_batch = 64;
  ParallelPlan p;
  p.dp = 8;
  p.micro_batches = 8;
  MemoryUse none = model_detail::memory_per_device(m, hw, p, w);
  p.zero_stage = 1;
  MemoryUse z1 = model_detail::memory_per_device(m, hw, p, w);
  EXPECT_DOUBLE_EQ(z1.optimizer, none.optimizer / 8);
  EXPECT_DOUBLE_EQ(z1.grads, none.grads);
  p.zero_stage = 3;
  MemoryUse z3 = model_detail::memory_per_device(m, hw, p, w);
  EXPECT_DOUBLE_EQ(z3.grads, none.grads / 8);
  EXPECT_DOUBLE_EQ(z3.params, none.params / 8);
  // bf16 weights, fp32 gradients, fp32 master + Adam moments: 2 + 4 + 12 bytes a parameter.
  EXPECT_NEAR(none.params / 2, m.total_params(), m.total_params() * 1e-9);
  EXPECT_DOUBLE_EQ(none.optimizer, none.params * 6);
}

TEST(ModelAccounting, TrainingStepComposesPhasesAndMfu) {
  ModelConfig m = load_model_config(shipped("models", "llama-3-70b"));
  HardwareSpec hw = load_hardware_spec(shipped("hardware", "h100"));
  ParallelPlan p = load_parallel_plan(shipped("plans", "llama-3-70b-train-h100"));
  Workload w = load_workload(shipped("workloads", "pretrain-4k-small"));
  Prediction r = predict(m, hw, p, w);
  double sum = 0;
  for (const PhaseResult& ph : r.phases) sum += ph.time_s;
  EXPECT_DOUBLE_EQ(r.step_s, sum);
  EXPECT_GT(r.mfu, 0.05);
  EXPECT_LT(r.mfu, 1.0);  // a floor can never beat the peak
  EXPECT_NEAR(r.tokens_per_s, 256.0 * 4096 / r.step_s, 1e-6 * r.tokens_per_s);
  EXPECT_LE(r.memory.total(), r.memory.capacity);
  EXPECT_EQ(r.phases.at(1).name, "pipeline bubble");
  EXPECT_GT(r.phases.at(1).bubble_s, 0);
}

// DeepSeek-V3's own plan: it fits an 80 GB H800, and the cross-node all-to-all comes out about
// as long as the computation it hides under (the report's roughly 1:1 ratio).
TEST(ModelAccounting, DeepSeekV3TrainingPlanFitsAndBalancesCommAndCompute) {
  Prediction r = predict(load_model_config(shipped("models", "deepseek-v3")),
                         load_hardware_spec(shipped("hardware", "h800")),
                         load_parallel_plan(shipped("plans", "deepseek-v3-train-h800")),
                         load_workload(shipped("workloads", "pretrain-4k")));
  EXPECT_LE(r.memory.total(), 80e9);
  const PhaseResult& fb = r.phases.at(0);
  double device = fb.compute_s + fb.memory_s;
  EXPECT_GT(fb.comm_s, 0.5 * device);
  EXPECT_LT(fb.comm_s, 1.5 * device);
  EXPECT_EQ(fb.exposed_comm_s, 0);  // DualPipe hides it
  EXPECT_NEAR(r.model_flops_per_token, 250e9, 0.01 * 250e9);
}

TEST(ModelAccounting, InferenceOverlapHidesCommunication) {
  ModelConfig m = load_model_config(shipped("models", "deepseek-v3"));
  HardwareSpec hw = load_hardware_spec(shipped("hardware", "h800"));
  ParallelPlan p = load_parallel_plan(shipped("plans", "deepseek-v3-decode-ep320-h800"));
  Workload w = load_workload(shipped("workloads", "ep-decode-speed-limit"));
  Prediction overlapped = predict(m, hw, p, w);
  p.overlap = false;
  Prediction serial = predict(m, hw, p, w);
  EXPECT_LT(overlapped.tpot_s, serial.tpot_s);
  EXPECT_GE(overlapped.tpot_s, overlapped.tpot_link_limit_s);
  EXPECT_GT(overlapped.ttft_s, 0);
}

TEST(ModelAccounting, DefaultPlanFitsEveryShippedPair) {
  Workload chat = load_workload(shipped("workloads", "chat"));
  for (const std::string& mn : test::all_shipped("models")) {
    ModelConfig m = load_model_config(shipped("models", mn));
    for (const std::string& hn : test::all_shipped("hardware")) {
      HardwareSpec hw = load_hardware_spec(shipped("hardware", hn));
      EXPECT_NO_THROW(predict(m, hw, default_plan(m, hw, chat), chat)) << mn << " on " << hn;
    }
  }
}

}  // namespace
}  // namespace sol
