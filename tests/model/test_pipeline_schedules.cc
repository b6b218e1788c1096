// The pipeline schedules run pass by pass (simulate_pipeline) against the closed forms of the
// DeepSeek-V3 report, table 2. 1F1B and ZB1P match their formulas for any chunk times; DualPipe's
// formula is exact when the input-gradient backward costs what the forward does (B - W = F, the
// report's uniform case) and only approximate otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "sol/error.h"
#include "sol/model.h"

namespace sol {
namespace {

struct Chunks { double f, b, w, fb; };

TEST(PipelineSchedules, OneFOneBMatchesItsFormulaAndHoldsPpMicroBatches) {
  for (int pp : {2, 4, 8, 16})
    for (int micro : {pp, 2 * pp + 3, 64})
      for (Chunks c : {Chunks{1, 2, 1, 3}, Chunks{0.7, 2.3, 0.4, 3}}) {
        PipelineSimulation sim = simulate_pipeline(Schedule::one_f_one_b, pp, micro, c.f, c.b, c.w, c.fb);
        PipelineCost formula = pipeline_cost(Schedule::one_f_one_b, pp, micro, c.f, c.b, c.w, c.fb);
        EXPECT_NEAR(sim.bubble_s, formula.bubble_s, 1e-9) << pp << " " << micro;
        EXPECT_NEAR(sim.makespan_s, micro * (c.f + c.b) + formula.bubble_s, 1e-9);
        EXPECT_EQ(sim.peak_inflight, pp);
      }
}

TEST(PipelineSchedules, ZeroBubbleMatchesItsFormulaWithinOneFOneBMemory) {
  for (int pp : {2, 4, 8, 16})
    for (int micro : {pp, 4 * pp})
      for (Chunks c : {Chunks{1, 2, 1, 3}, Chunks{1, 2, 0.9, 3}, Chunks{1, 2.3, 0.7, 3},
                       Chunks{1, 2, 0.5, 3}, Chunks{1, 2, 0, 3}}) {
        PipelineSimulation sim = simulate_pipeline(Schedule::zb1p, pp, micro, c.f, c.b, c.w, c.fb);
        double formula = (pp - 1) * (c.f + c.b - 2 * c.w);
        EXPECT_NEAR(sim.bubble_s, formula, 1e-9) << pp << " " << micro << " w " << c.w;
        EXPECT_NEAR(sim.makespan_s, micro * (c.f + c.b) + formula, 1e-9);
        EXPECT_LE(sim.peak_inflight, pp);
      }
}

TEST(PipelineSchedules, DualPipeMatchesItsFormulaWhenTheInputGradientCostsAForward) {
  for (int pp : {2, 4, 8, 16})
    for (int micro : {2 * pp, 4 * pp + 2})
      // B - W = F in each; F&B from full overlap (max) to none (sum).
      for (Chunks c : {Chunks{1, 2, 1, 3}, Chunks{1, 2, 1, 2}, Chunks{1, 2, 1, 2.5},
                       Chunks{1, 1, 0, 2}, Chunks{2, 3, 1, 4}}) {
        PipelineSimulation sim = simulate_pipeline(Schedule::dualpipe, pp, micro, c.f, c.b, c.w, c.fb);
        PipelineCost formula = pipeline_cost(Schedule::dualpipe, pp, micro, c.f, c.b, c.w, c.fb);
        EXPECT_NEAR(sim.bubble_s, (pp / 2.0 - 1) * (c.fb + c.b - 3 * c.w), 1e-9)
            << pp << " " << micro << " f " << c.f << " b " << c.b << " w " << c.w;
        EXPECT_NEAR(sim.bubble_s, formula.bubble_s, 1e-9);
        EXPECT_EQ(sim.peak_inflight, pp + 1);  // the report's PP + 1 activations
      }
}

TEST(PipelineSchedules, DualPipeFormulaIsApproximateOtherwise) {
  // W = F / 2 with B = 2F (so B - W = 1.5 F): pass by pass every device idles less than the
  // closed form says, by half a forward at PP 4 and a whole one from PP 8 on.
  for (int pp : {4, 8, 16}) {
    PipelineSimulation sim = simulate_pipeline(Schedule::dualpipe, pp, 4 * pp, 1, 2, 0.5, 3);
    double formula = (pp / 2.0 - 1) * (3 + 2 - 1.5);
    EXPECT_LT(sim.bubble_s, formula) << pp;
    EXPECT_GT(sim.bubble_s, formula - 1.01) << pp;
  }
}

TEST(PipelineSchedules, OverlapOnlyPaysInTheSteadyState) {
  // With F&B fully overlapped, the warm-up and cool-down passes that run alone cost more than
  // their share of F&B: the step is longer than micro_batches x F&B + the idle bubble.
  PipelineSimulation sim = simulate_pipeline(Schedule::dualpipe, 8, 32, 1, 2, 1, 2);
  EXPECT_GT(sim.makespan_s, 32 * 2 + sim.bubble_s);
  PipelineSimulation serial = simulate_pipeline(Schedule::dualpipe, 8, 32, 1, 2, 1, 3);
  EXPECT_NEAR(serial.makespan_s, 32 * 3 + serial.bubble_s, 1e-9);
}

// The recorded timeline is the schedule: passes of a stage never overlap, every micro-batch's
// forward and backward appear once per stage, and a forward starts only after the previous
// stage's forward of the same micro-batch has ended.
TEST(PipelineSchedules, TimelineHoldsEveryPassInDependencyOrder) {
  const int pp = 8, micro = 16;
  for (Schedule sched : {Schedule::one_f_one_b, Schedule::zb1p, Schedule::dualpipe}) {
    PipelineSimulation sim = simulate_pipeline(sched, pp, micro, 1, 2, 0.8, 2.5);
    ASSERT_EQ(sim.stages.size(), size_t(pp));
    std::map<std::pair<int, int>, std::vector<double>> forward_start;  // (dir, mb) -> starts
    for (int s = 0; s < pp; ++s) {
      int forwards = 0, backwards = 0, weights = 0, split = 0;
      double last_end = 0;
      for (const PipelinePass& pass : sim.stages[s]) {
        EXPECT_GE(pass.start_s, last_end - 1e-12) << s;  // one pass at a time
        EXPECT_GT(pass.end_s, pass.start_s);
        last_end = pass.end_s;
        EXPECT_LE(pass.end_s, sim.makespan_s + 1e-12);
        if (pass.kind == 'F' || pass.kind == 'X') {
          ++forwards;
          forward_start[{pass.direction, pass.micro_batch}].push_back(pass.start_s);
        }
        if (pass.kind == 'B' || pass.kind == 'X') ++backwards;
        if (pass.kind == 'B' && std::abs(pass.end_s - pass.start_s - (2 - 0.8)) < 1e-12) ++split;
        if (pass.kind == 'W') ++weights;
      }
      EXPECT_EQ(forwards, micro) << schedule_name(sched) << " stage " << s;
      EXPECT_EQ(backwards, micro) << schedule_name(sched) << " stage " << s;
      EXPECT_EQ(weights, split) << schedule_name(sched) << " stage " << s;
      if (sched == Schedule::one_f_one_b) {
        EXPECT_EQ(weights, 0);
      }
      if (sched == Schedule::zb1p) {
        EXPECT_EQ(weights, micro);
      }
    }
    // Every micro-batch of each direction passes through every stage once.
    for (const auto& entry : forward_start) ASSERT_EQ(entry.second.size(), size_t(pp));
    for (int mb = 0; mb < (sched == Schedule::dualpipe ? micro / 2 : micro); ++mb) {
      std::vector<double> start(pp), end(pp);
      for (int s = 0; s < pp; ++s)
        for (const PipelinePass& pass : sim.stages[s])
          if ((pass.kind == 'F' || pass.kind == 'X') && pass.direction == 0 && pass.micro_batch == mb) {
            start[s] = pass.start_s;
            end[s] = pass.end_s;
          }
      for (int s = 1; s < pp; ++s) EXPECT_GE(start[s], end[s - 1] - 1e-12) << mb << " " << s;
    }
  }
}

TEST(PipelineSchedules, ScheduleThatCannotRunIsRejected) {
  auto message = [](auto body) {
    try {
      body();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string odd = message([] { simulate_pipeline(Schedule::dualpipe, 3, 6, 1, 2, 1, 3); });
  EXPECT_NE(odd.find("dualpipe needs an even pp"), std::string::npos) << odd;
  std::string few = message([] { simulate_pipeline(Schedule::dualpipe, 8, 8, 1, 2, 1, 3); });
  EXPECT_NE(few.find("micro_batches = 8"), std::string::npos) << few;
  std::string w = message([] { simulate_pipeline(Schedule::zb1p, 4, 8, 1, 2, 3, 3); });
  EXPECT_NE(w.find("w <= b"), std::string::npos) << w;
  std::string zero = message([] { simulate_pipeline(Schedule::one_f_one_b, 0, 8, 1, 2, 1, 3); });
  EXPECT_NE(zero.find("pp = 0"), std::string::npos) << zero;
}

TEST(PipelineSchedules, PlanWithTooFewDualPipeMicroBatchesNamesBoth) {
  ModelConfig m;
  m.name = "tiny";
  m.hidden = 64;
  m.layers = 8;
  m.heads = m.kv_heads = 4;
  m.head_dim = 16;
  m.intermediate = 128;
  m.vocab = 100;
  HardwareSpec hw;
  hw.name = "dev";
  hw.flops_bf16 = 1e12;
  ParallelPlan p;
  p.name = "dp";
  p.pp = 4;
  p.schedule = Schedule::dualpipe;
  p.micro_batches = 6;
  Workload w;
  w.seq_len = 16;
  w.global_batch = 6;
  try {
    validate_plan(m, hw, p, w);
    ADD_FAILURE() << "expected sol::Error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("at least 2 x pp"), std::string::npos) << what;
    EXPECT_NE(what.find("micro_batches = 6"), std::string::npos) << what;
  }
  p.micro_batches = 8;
  w.global_batch = 8;
  EXPECT_NO_THROW(validate_plan(m, hw, p, w));
}

}  // namespace
}  // namespace sol
