// The co-design model against figures DeepSeek published. Every "ours" below comes out of the
// model's arithmetic on the shipped JSON files; docs/model.md tabulates published vs ours and
// explains each gap.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/accounting.h"
#include "model_files.h"
#include "sol/model.h"

namespace sol {
namespace {

using test::shipped;

double relative_gap(double ours, double published) { return (ours - published) / published; }

// "Insights into DeepSeek-V3" (ISCA 2025), table 1: KV cache per token in BF16.
TEST(ModelValidation, KvCacheBytesPerToken) {
  struct Case { const char* model; double published_kb; } cases[] = {
      {"deepseek-v3", 70.272}, {"qwen2.5-72b", 327.680}, {"llama-3.1-405b", 516.096}};
  for (const Case& c : cases) {
    double ours = kv_cache_bytes_per_token(load_model_config(shipped("models", c.model)), DType::bf16);
    EXPECT_DOUBLE_EQ(ours / 1e3, c.published_kb) << c.model;
  }
}

// Same paper, table 2: training compute per token at sequence length 4096.
TEST(ModelValidation, TrainingFlopsPerToken) {
  ModelConfig v3 = load_model_config(shipped("models", "deepseek-v3"));
  ModelConfig l405 = load_model_config(shipped("models", "llama-3.1-405b"));
  EXPECT_LT(std::abs(relative_gap(training_flops_per_token(v3, 4096, false), 250e9)), 0.01);
  EXPECT_LT(std::abs(relative_gap(training_flops_per_token(l405, 4096, false), 2448e9)), 0.015);
  // MTP adds one MoE layer, a projection and a second pass through the head: about 4%.
  double with_mtp = training_flops_per_token(v3, 4096, true);
  EXPECT_GT(with_mtp / training_flops_per_token(v3, 4096, false), 1.03);
  EXPECT_LT(with_mtp / training_flops_per_token(v3, 4096, false), 1.06);
  // The paper's 394 GFLOPs for "Qwen-72B" lies below 6 x Qwen2.5-72B's non-embedding weights
  // alone (docs/model.md); check ours against the 6N + causal attention rule instead.
  ModelConfig q72 = load_model_config(shipped("models", "qwen2.5-72b"));
  double embeddings = 2.0 * q72.vocab * q72.hidden;
  double six_n = 6 * (q72.total_params() - embeddings + double(q72.vocab) * q72.hidden);
  double attention = 3 * 2.0 * q72.layers * q72.heads * 2 * q72.head_dim * (4096 + 1) / 2.0;
  EXPECT_NEAR(training_flops_per_token(q72, 4096, false), six_n + attention, 1e-6 * six_n);
}

// The same table's 394 GFLOPs for "Qwen-72B" is 11-13% below ours for both Qwen 72B shapes. No
// term of ours is the cause: the matrix weights alone, at 6 FLOPs each per trained token,
// already exceed 394 GFLOPs for either shape, while the arithmetic that gives them reproduces
// DeepSeek-V3 (+0.2%) and LLaMA-3.1 405B (+1.0%) from the same table. Read back through that
// arithmetic, 394 GFLOPs is 63B weights, which no published Qwen 72B has.
TEST(ModelValidation, QwenSeventyTwoBGapIsInThePublishedFigure) {
  constexpr double kPublished = 394e9;
  // Qwen1.5-72B, the shape of the first Qwen-72B too (huggingface.co/Qwen/Qwen1.5-72B): MHA.
  ModelConfig qwen1 = parse_model_config(R"({"name": "qwen1.5-72b", "source": "hf config",
      "hidden_size": 8192, "intermediate_size": 24576, "num_hidden_layers": 80,
      "num_attention_heads": 64, "num_key_value_heads": 64, "vocab_size": 152064})", "qwen1.5");
  ModelConfig qwen25 = load_model_config(shipped("models", "qwen2.5-72b"));
  for (const ModelConfig& m : {qwen1, qwen25}) {
    double embeddings = 2.0 * m.vocab * m.hidden;
    double layer_weights = m.total_params() - embeddings;
    double ours = training_flops_per_token(m, 4096, false);
    EXPECT_GT(6 * layer_weights, 1.05 * kPublished) << m.name;  // weights alone are above
    EXPECT_GT(relative_gap(ours, kPublished), 0.11) << m.name;
    EXPECT_LT(relative_gap(ours, kPublished), 0.14) << m.name;
    // Ours minus the published figure, spent on weights: 7-9B more than the paper counted.
    double lm_head = double(m.vocab) * m.hidden;
    double attention = ours - 6 * (layer_weights + lm_head);
    double implied_weights = (kPublished - attention) / 6;
    EXPECT_GT(implied_weights, 61e9) << m.name;
    EXPECT_LT(implied_weights, 64e9) << m.name;
    EXPECT_LT(implied_weights, 0.9 * (layer_weights + lm_head)) << m.name;
  }
}

// 1F1B by event simulation: each stage runs its warm-up forwards, then one forward and one
// backward alternately, then the remaining backwards; an op starts when its stage is free and
// its input (the previous stage's forward, the next stage's backward) is ready.
double simulate_1f1b(int stages, int micro, double f, double b) {
  struct Op { bool forward; int mb; };
  std::vector<std::vector<Op>> order(stages);
  for (int s = 0; s < stages; ++s) {
    int warm = std::min(stages - s - 1, micro), next_f = 0, next_b = 0;
    for (; next_f < warm; ++next_f) order[s].push_back({true, next_f});
    while (next_b < micro) {
      if (next_f < micro) order[s].push_back({true, next_f++});
      order[s].push_back({false, next_b++});
    }
  }
  std::vector<std::vector<double>> f_end(stages, std::vector<double>(micro, -1)),
      b_end = f_end;
  std::vector<size_t> pos(stages, 0);
  std::vector<double> free_at(stages, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      if (pos[s] == order[s].size()) continue;
      Op op = order[s][pos[s]];
      double ready = op.forward ? (s == 0 ? 0 : f_end[s - 1][op.mb])
                                : (s == stages - 1 ? f_end[s][op.mb] : b_end[s + 1][op.mb]);
      if (ready < 0) continue;
      double end = std::max(ready, free_at[s]) + (op.forward ? f : b);
      (op.forward ? f_end : b_end)[s][op.mb] = free_at[s] = end;
      ++pos[s];
      progress = true;
    }
  }
  return *std::max_element(free_at.begin(), free_at.end());
}

// DeepSeek-V3 report, table 2, with F, B and W of one DeepSeek-V3 stage from the model.
TEST(ModelValidation, PipelineBubbles) {
  ModelConfig v3 = load_model_config(shipped("models", "deepseek-v3"));
  HardwareSpec h800 = load_hardware_spec(shipped("hardware", "h800"));
  ParallelPlan plan = load_parallel_plan(shipped("plans", "deepseek-v3-train-h800"));
  Workload w = load_workload(shipped("workloads", "pretrain-4k"));
  model_detail::Pass pass = model_detail::training_pass(plan, w);
  double f = 0, wgrad = 0;
  for (int64_t l = 57; l < 61; ++l)
    for (const auto& op : model_detail::layer_ops(v3, h800, plan, l, pass)) {
      if (op.kind == model_detail::OpKind::comm) continue;
      double t = model_detail::op_time(op, h800).floor_s();
      f += t;
      if (op.kind == model_detail::OpKind::gemm) wgrad += t;
    }
  double b = 2 * f, fb = f + b;
  int pp = plan.pp, micro = plan.micro_batches;

  double simulated = simulate_1f1b(pp, micro, f, b) - micro * (f + b);
  PipelineCost one = pipeline_cost(Schedule::one_f_one_b, pp, micro, f, b, wgrad, fb);
  EXPECT_NEAR(one.bubble_s, simulated, 1e-9 * simulated);
  EXPECT_NEAR(one.bubble_s, (pp - 1) * (f + b), 1e-12);
  EXPECT_NEAR(simulate_pipeline(Schedule::one_f_one_b, pp, micro, f, b, wgrad, fb).makespan_s,
              simulate_1f1b(pp, micro, f, b), 1e-9 * simulated);
  PipelineCost zb = pipeline_cost(Schedule::zb1p, pp, micro, f, b, wgrad, fb);
  EXPECT_NEAR(zb.bubble_s, (pp - 1) * (f + b - 2 * wgrad), 1e-12);
  // ZB1P run pass by pass: weight gradients fill the gaps, the formula holds exactly.
  PipelineSimulation zb_sim = simulate_pipeline(Schedule::zb1p, pp, micro, f, b, wgrad, fb);
  EXPECT_NEAR(zb_sim.bubble_s, zb.bubble_s, 1e-9 * zb.bubble_s);
  EXPECT_LE(zb_sim.peak_inflight, pp);
  PipelineCost dual = pipeline_cost(Schedule::dualpipe, pp, micro, f, b, wgrad, fb);
  EXPECT_NEAR(dual.bubble_s, (pp / 2.0 - 1) * (fb + b - 3 * wgrad), 1e-12);
  // DualPipe pass by pass: this stage's input-gradient backward (B - W) is not one forward,
  // so the closed form is an approximation: it charges one forward chunk more than the
  // schedule idles.
  PipelineSimulation dual_sim = simulate_pipeline(Schedule::dualpipe, pp, micro, f, b, wgrad, fb);
  EXPECT_NEAR(dual.bubble_s - dual_sim.bubble_s, f, 1e-6 * f);
  EXPECT_EQ(dual_sim.peak_inflight, pp + 1);
  EXPECT_LT(dual_sim.bubble_s, zb_sim.bubble_s);
  EXPECT_LT(zb.bubble_s, one.bubble_s);
  EXPECT_LT(dual.bubble_s, zb.bubble_s);
  EXPECT_EQ(one.param_copies, 1);
  EXPECT_EQ(dual.param_copies, 2);
  EXPECT_EQ(one.inflight_microbatches, pp);
  EXPECT_EQ(dual.inflight_microbatches, pp + 1);
}

// ISCA 2025 paper, section 4.3: with two micro-batches of 32 tokens per device overlapped,
// each MoE layer moves (1 B FP8 dispatch + 2 B BF16 combine) x 32 tokens x 9 experts x 7K
// hidden per micro-batch; over 400 Gb/s IB that bounds TPOT at 14.76 ms (67 tokens/s), over
// GB200 NVL72's 900 GB/s at 0.82 ms (about 1200 tokens/s).
TEST(ModelValidation, ExpertParallelDecodeSpeedLimit) {
  ModelConfig v3 = load_model_config(shipped("models", "deepseek-v3"));
  Workload w = load_workload(shipped("workloads", "ep-decode-speed-limit"));
  struct Case {
    const char* hw; const char* plan; double published_ms, published_tps, remote_share;
  } cases[] = {
      // EP 320 on 40 nodes: 312 of 320 peers are off-node (the rest go over NVLink).
      {"h800", "deepseek-v3-decode-ep320-h800", 14.76, 67, 312.0 / 320},
      // EP 72 in one NVLink domain: 71 of 72 peers are another GPU.
      {"gb200-nvl72", "deepseek-v3-decode-ep72-nvl72", 0.82, 1200, 71.0 / 72}};
  for (const Case& c : cases) {
    Prediction p = predict(v3, load_hardware_spec(shipped("hardware", c.hw)),
                           load_parallel_plan(shipped("plans", c.plan)), w);
    double ours_ms = p.tpot_link_limit_s * 1e3;
    EXPECT_LT(std::abs(relative_gap(ours_ms, c.published_ms)), 0.06) << c.hw << ": " << ours_ms;
    EXPECT_LT(std::abs(relative_gap(1e3 / ours_ms, c.published_tps)), 0.07) << c.hw;
    // The whole gap is the paper's simplifications: all 61 layers (ours: the 58 MoE layers),
    // hidden 7K = 7000 (ours: 7168), and every expert remote (ours: the remote share).
    double as_the_paper = ours_ms * (61.0 / 58) * (7000.0 / 7168) / c.remote_share;
    EXPECT_LT(std::abs(relative_gap(as_the_paper, c.published_ms)), 0.005) << c.hw;
  }
}

// DeepEP's low-latency kernels (github.com/deepseek-ai/DeepEP, docs/legacy.md): H800 with one
// 400 Gb/s CX7 each, 128 tokens per batch, hidden 7168, top-8, FP8 dispatch, BF16 combine.
// Its "RDMA bandwidth" is logical bytes (every token-expert copy) over the latency; the model's
// floor for the same transfer must never exceed the measured latency.
TEST(ModelValidation, DeepEpLowLatencyBandwidthAndFloor) {
  ModelConfig v3 = load_model_config(shipped("models", "deepseek-v3"));
  HardwareSpec h800 = load_hardware_spec(shipped("hardware", "h800"));
  struct Row { int ep; double dispatch_us, dispatch_gbps, combine_us, combine_gbps; } rows[] = {
      {8, 77, 98, 114, 127},    {16, 118, 63, 195, 74},   {32, 155, 48, 273, 53},
      {64, 173, 43, 314, 46},   {128, 192, 39, 369, 39},  {256, 194, 39, 360, 40}};
  constexpr double kTokens = 128;
  for (const Row& r : rows) {
    ParallelPlan p;
    p.dp = p.ep = r.ep;
    double copies = kTokens * model_detail::experts_per_token(v3, p) * v3.hidden;
    // Dispatch also carries one fp32 scale per 128 FP8 values, which the model leaves out:
    // 4/128 = 3.1% more bytes than ours.
    EXPECT_LT(std::abs(relative_gap(copies * 1 / (r.dispatch_us * 1e-6), r.dispatch_gbps * 1e9)), 0.04) << r.ep;
    EXPECT_LT(std::abs(relative_gap(copies * 2 / (r.combine_us * 1e-6), r.combine_gbps * 1e9)), 0.04) << r.ep;
    if (r.ep <= h800.scale_up_size) continue;  // DeepEP sends intra-node copies by RDMA too
    for (auto [dtype, measured_us] : {std::pair{DType::f8e4m3, r.dispatch_us}, {DType::bf16, r.combine_us}}) {
      double floor_us = 0;
      for (const auto& op : model_detail::expert_all_to_all("x", v3, h800, p, kTokens, dtype))
        floor_us = std::max(floor_us, model_detail::op_time(op, h800).floor_s() * 1e6);
      EXPECT_LT(floor_us, measured_us) << r.ep;           // a floor never beats a measurement
      EXPECT_GT(floor_us, 0.5 * measured_us) << r.ep;     // and DeepEP runs near it
    }
  }
}

}  // namespace
}  // namespace sol
