// The text renderers: the per-op table lists each phase's largest ops, largest first.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "model_files.h"
#include "sol/model.h"

namespace sol {
namespace {

using test::shipped;

// MFU names its peak: the plan's GEMM dtype first (an FP8 step's MFU is of the fp8 peak), the
// other matrix peak after it, labelled for comparison (against bf16 an FP8 step passes 100%).
TEST(ModelRender, MfuNamesThePeakOfThePlansGemmDtype) {
  Prediction fp8 = predict(load_model_config(shipped("models", "deepseek-v3")),
                           load_hardware_spec(shipped("hardware", "h800")),
                           load_parallel_plan(shipped("plans", "deepseek-v3-train-h800")),
                           load_workload(shipped("workloads", "pretrain-4k")));
  EXPECT_EQ(fp8.mfu_peak, "fp8");
  std::string text = prediction_table(fp8);
  char headline[64];
  std::snprintf(headline, sizeof headline, "MFU %.1f%% of the fp8 peak\n", 100 * fp8.mfu);
  EXPECT_NE(text.find(headline), std::string::npos) << text;
  const size_t named = text.find("MFU of the fp8 peak (the plan's GEMM dtype): ");
  const size_t other = text.find("; for comparison, of the bf16 peak: ");
  ASSERT_NE(named, std::string::npos) << text;
  ASSERT_NE(other, std::string::npos) << text;
  EXPECT_LT(named, other);
  EXPECT_EQ(text.find("MFU of the bf16 peak"), std::string::npos) << text;

  Prediction bf16 = predict(load_model_config(shipped("models", "llama-3-70b")),
                            load_hardware_spec(shipped("hardware", "h100")),
                            load_parallel_plan(shipped("plans", "llama-3-70b-train-h100")),
                            load_workload(shipped("workloads", "pretrain-4k-small")));
  EXPECT_EQ(bf16.mfu_peak, "bf16");
  text = prediction_table(bf16);
  EXPECT_NE(text.find("MFU of the bf16 peak (the plan's GEMM dtype): "), std::string::npos) << text;
  EXPECT_NE(text.find("; for comparison, of the fp8 peak: "), std::string::npos) << text;
}

TEST(ModelRender, OpsTableListsTheLargestOpsOfEachPhaseInOrder) {
  Prediction p = predict(load_model_config(shipped("models", "deepseek-v3")),
                         load_hardware_spec(shipped("hardware", "h800")),
                         load_parallel_plan(shipped("plans", "deepseek-v3-decode-ep320-h800")),
                         load_workload(shipped("workloads", "ep-decode-speed-limit")));
  EXPECT_EQ(prediction_ops_table(p, 0), "");
  EXPECT_EQ(prediction_ops_table(p, -3), "");
  std::string table = prediction_ops_table(p, 3);
  std::istringstream in(table);
  std::string line, phase;
  std::vector<double> floors;
  int phases = 0;
  auto check_phase = [&] {
    if (phase.empty()) return;
    ASSERT_EQ(floors.size(), 3u) << phase;
    EXPECT_GE(floors[0], floors[1]) << phase;
    EXPECT_GE(floors[1], floors[2]) << phase;
    // The first row is the phase's largest op floor.
    double largest = 0;
    for (const OpRecord& r : p.ops)
      if (r.phase == phase) largest = std::max(largest, r.floor_s * 1e3);
    EXPECT_NEAR(floors[0], largest, 1e-3) << phase;
  };
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("op ", 0) == 0) continue;
    if (line.find(": the 3 largest of") != std::string::npos) {
      check_phase();
      phase = line.substr(0, line.find(':'));
      floors.clear();
      ++phases;
      continue;
    }
    std::istringstream row(line);
    std::string name, kind;
    double count, gflop, gb, link_gb, floor_ms;
    row >> name >> kind >> count >> gflop >> gb >> link_gb >> floor_ms;
    ASSERT_FALSE(row.fail()) << line;
    floors.push_back(floor_ms);
  }
  check_phase();
  EXPECT_EQ(phases, 2);  // prefill and decode
  EXPECT_NE(table.find("attn.core_latent"), std::string::npos);  // decode's largest device op
}

// The step timeline draws the simulated schedule: one row per stage, a forward and a backward
// of every micro-batch on each (1F1B), and nothing of the kind for inference.
TEST(ModelRender, TimelineDrawsEveryPassOfEveryStage) {
  ParallelPlan plan = load_parallel_plan(shipped("plans", "llama-3-70b-train-h100"));
  Prediction p = predict(load_model_config(shipped("models", "llama-3-70b")),
                         load_hardware_spec(shipped("hardware", "h100")), plan,
                         load_workload(shipped("workloads", "pretrain-4k-small")));
  std::string svg = prediction_svg(p);
  ASSERT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("one step, pass by pass: 1f1b over 4 stages"), std::string::npos);
  for (int s = 0; s < plan.pp; ++s) {
    for (const char* pass : {"F", "B"}) {
      std::string tag = "data-stage=\"" + std::to_string(s) + "\" data-pass=\"" + pass + "\"";
      size_t n = 0;
      for (size_t at = svg.find(tag); at != std::string::npos; at = svg.find(tag, at + 1)) ++n;
      EXPECT_EQ(n, size_t(plan.micro_batches)) << s << pass;
    }
  }
  Prediction decode = predict(load_model_config(shipped("models", "deepseek-v3")),
                              load_hardware_spec(shipped("hardware", "h800")),
                              load_parallel_plan(shipped("plans", "deepseek-v3-decode-ep320-h800")),
                              load_workload(shipped("workloads", "ep-decode-speed-limit")));
  EXPECT_EQ(prediction_svg(decode).find("data-pass"), std::string::npos);
}

TEST(ModelRender, HugeScheduleIsDrawnAsBusySpansOnly) {
  Prediction p;
  p.model = "m";
  p.pipeline.schedule = "1f1b";
  p.pipeline.makespan_s = 2;
  p.pipeline.timeline.assign(2, {});
  for (auto& stage : p.pipeline.timeline)
    for (int i = 0; i < 10001; ++i) stage.push_back({i * 1e-4, (i + 1) * 1e-4, 'F', i, 0});
  std::string svg = prediction_svg(p);
  EXPECT_NE(svg.find("20002 passes: too many to draw"), std::string::npos);
  EXPECT_EQ(svg.find("data-pass"), std::string::npos);
  EXPECT_NE(svg.find("data-stage=\"1\""), std::string::npos);
  EXPECT_LT(svg.size(), 20000u);
}

// Decoding with expert parallelism: one MoE layer's two micro-batches, attention and experts on
// the device, dispatch and combine on the links; each transfer starts after the computation
// that feeds it and the experts wait for their dispatch.
TEST(ModelRender, DecodeTimelineShowsTheMicroBatchOverlap) {
  Prediction p = predict(load_model_config(shipped("models", "deepseek-v3")),
                         load_hardware_spec(shipped("hardware", "h800")),
                         load_parallel_plan(shipped("plans", "deepseek-v3-decode-ep320-h800")),
                         load_workload(shipped("workloads", "chat")));
  std::string svg = prediction_svg(p);
  std::map<std::string, std::pair<double, double>> at;  // block: x, x + width
  std::regex block(R"re(data-block="([^"]+)" x="([^"]+)" y="[^"]+" width="([^"]+)")re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), block); it != std::sregex_iterator(); ++it)
    at[(*it)[1]] = {std::stod((*it)[2]), std::stod((*it)[2]) + std::stod((*it)[3])};
  ASSERT_EQ(at.size(), 8u) << svg;
  const double eps = 0.01;
  EXPECT_GE(at["dispatch 0"].first, at["attention 0"].second - eps);
  EXPECT_GE(at["dispatch 1"].first, at["attention 1"].second - eps);
  EXPECT_GE(at["dispatch 1"].first, at["dispatch 0"].second - eps);
  EXPECT_GE(at["experts 0"].first, at["dispatch 0"].second - eps);
  EXPECT_GE(at["experts 1"].first, at["dispatch 1"].second - eps);
  EXPECT_GE(at["combine 0"].first, at["experts 0"].second - eps);
  EXPECT_GE(at["combine 1"].first, at["experts 1"].second - eps);
  // Overlap: micro-batch 1's attention runs while micro-batch 0 is dispatched.
  EXPECT_LT(at["attention 1"].first, at["dispatch 0"].second);
  EXPECT_NE(svg.find("two micro-batches overlapped"), std::string::npos);
}

// Training: the gradient sync is drawn under the last backward passes where it is hidden.
TEST(ModelRender, TimelineShowsTheGradientSyncHiddenUnderCompute) {
  Prediction p = predict(load_model_config(shipped("models", "deepseek-v3")),
                         load_hardware_spec(shipped("hardware", "h800")),
                         load_parallel_plan(shipped("plans", "deepseek-v3-train-h800")),
                         load_workload(shipped("workloads", "pretrain-4k")));
  std::string svg = prediction_svg(p);
  EXPECT_NE(svg.find("data-sync=\"hidden\""), std::string::npos);
  EXPECT_NE(svg.find("ms hidden under the backward passes, 0.000 ms exposed"), std::string::npos);
}

}  // namespace
}  // namespace sol
