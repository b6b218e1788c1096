// The efficiency layer: class lookup and fallback, strict reading, the round trip from kernel
// records, the H800 anchors' rows recomputed from their published figures, and its use in
// predictions.
#include <gtest/gtest.h>

#include "expect_error.h"
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "model/accounting.h"
#include "model_files.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol {
namespace {

using test::shipped;

EfficiencyRow row(const std::string& work, double eff) {
  return {work, eff, "k", "s", "m", "test"};
}

TEST(EfficiencyLayer, FractionIsTheMedianThenTheNearestCalibratedClass) {
  Efficiency e;
  e.rows = {row("gemm.bf16.decode", 0.5), row("gemm.bf16.decode", 0.7), row("gemm.bf16.large", 0.9),
            row("attention.fwd", 0.6)};
  std::string used;
  EXPECT_DOUBLE_EQ(e.fraction("gemm.bf16.decode", &used), 0.6);
  EXPECT_EQ(used, "gemm.bf16.decode");
  EXPECT_DOUBLE_EQ(e.fraction("gemm.bf16.mid", &used), 0.7);  // median of every gemm.bf16 row
  EXPECT_EQ(used, "gemm.bf16");
  EXPECT_DOUBLE_EQ(e.fraction("grouped_gemm.bf16.large", &used), 0.9);
  EXPECT_EQ(used, "gemm.bf16.large");
  EXPECT_DOUBLE_EQ(e.fraction("attention.bwd", &used), 0.6);
  EXPECT_EQ(used, "attention");
  EXPECT_DOUBLE_EQ(e.fraction("allreduce.scale_up", &used), 1);
  EXPECT_EQ(used, "");
  // A prefix matches whole segments only: "gemm.bf1" is not "gemm.bf16".
  EXPECT_DOUBLE_EQ(e.fraction("gemm.bf1.decode", &used), 0.7);
  EXPECT_EQ(used, "gemm");
  // A class matches its own rows only, not its subclasses'; a median above 1 leaves the floor.
  Efficiency links;
  links.rows = {row("ep.combine.scale_out", 1.2), row("ep.combine.scale_out", 1.1),
                row("ep.combine.scale_out.decode", 0.5)};
  EXPECT_DOUBLE_EQ(links.fraction("ep.combine.scale_out"), 1);
  EXPECT_DOUBLE_EQ(links.fraction("ep.combine.scale_out.decode"), 0.5);
  EXPECT_DOUBLE_EQ(links.fraction("ep.combine.scale_up", &used), 1);  // median of all three: 1.1
  EXPECT_EQ(used, "ep.combine");
}

using test::expect_error;

TEST(EfficiencyLayer, BadFilesNameTheRowAndKey) {
  auto doc = [](const std::string& rows, const std::string& extra) {
    std::string text = R"({"name": "x", )";
    return text.append(extra).append(R"("rows": [)").append(rows).append("]}");
  };
  auto with = [](const std::string& from, const char* what, const char* by) {
    return std::regex_replace(from, std::regex(what), by);
  };
  const std::string good = R"({"work": "memory", "efficiency": 0.8, "kernel": "k", "shape": "s",
                         "measured": "1 s", "source": "here"})";
  EXPECT_EQ(parse_efficiency(doc(good, ""), "e.json").rows.size(), 1u);
  const std::string zero = doc(std::string(good).append(",").append(with(good, "0.8", "0")), "");
  const std::string above = doc(with(good, "0.8", "2.5"), "");
  const std::string empty = doc("", "");
  const std::string typo = doc(with(good, "\"shape\"", "\"shap\""), "");
  const std::string all_sms = doc(good, R"("comm_sm_fraction": {"value": 1, "source": "s"}, )");
  const std::string extra = doc(good, R"("extra": 1, )");
  expect_error([&] { parse_efficiency(zero, "e.json"); }, {"e.json rows[1]", "efficiency", "(0, 1.5]"});
  expect_error([&] { parse_efficiency(above, "e.json"); }, {"rows[0]", "efficiency"});
  expect_error([&] { parse_efficiency(empty, "e.json"); }, {"e.json", "rows", "non-empty"});
  expect_error([&] { parse_efficiency(typo, "e.json"); }, {"rows[0]", "shape"});
  expect_error([&] { parse_efficiency(all_sms, "e.json"); }, {"comm_sm_fraction", "[0, 1)"});
  expect_error([&] { parse_efficiency(extra, "e.json"); }, {"unknown key 'extra'"});
}

TEST(EfficiencyLayer, SolRecordsMapToTheModelsWorkClasses) {
  EXPECT_EQ(sol_op_work_class("gemm", "bf16->bf16", "m=16,n=7168,k=2048,nt,packed", "memory"),
            "gemm.bf16.decode");
  EXPECT_EQ(sol_op_work_class("gemm", "bf16xf8e4m3->bf16", "m=4096,n=2048,k=7168,nt", "compute"),
            "gemm.bf16.large");
  EXPECT_EQ(sol_op_work_class("gemm", "f8e4m3->bf16", "m=512,n=2048,k=7168,nt", "compute"),
            "gemm.f8e4m3.mid");
  EXPECT_EQ(sol_op_work_class("gemm-grouped", "f8e4m3xf8e4m3->bf16",
                              "experts=4,n=4096,k=7168,rows=100:300:0:400,contiguous", "compute"),
            "grouped_gemm.f8e4m3.mid");  // 800 rows over 4 groups
  EXPECT_EQ(sol_op_work_class("attention-bwd", "bf16", "b=1", "compute"), "attention.bwd");
  EXPECT_EQ(sol_op_work_class("mla-decode", "bf16", "b=64", "memory"), "mla.decode.memory");
  EXPECT_EQ(sol_op_work_class("rmsnorm", "bf16", "tokens=4096", "memory"), "memory");
}

std::string write_temp(const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

std::string record(const std::string& op, const std::string& shape, const std::string& dtype,
                   int threads, double floor, double time, double moved = 1.0) {
  return R"({"op": ")" + op + R"(", "shape": ")" + shape + R"(", "dtype": ")" + dtype +
         R"(", "threads": )" + std::to_string(threads) + R"(, "floor_s": )" + std::to_string(floor) +
         R"(, "time_s": )" + std::to_string(time) + R"(, "bound": "memory", "ceiling_moved": )" +
         std::to_string(moved) + "}";
}

// A record the scheduler cut into (median run 2x its fastest) is no row of the layer.
TEST(EfficiencyLayer, ScheduledOutRecordsAreDropped) {
  std::string cut = record("rmsnorm", "tokens=4096", "bf16", 1, 1e-3, 2e-3);
  cut.insert(cut.size() - 1, R"(, "min_s": 0.001)");
  std::string kept = record("rmsnorm", "tokens=16", "bf16", 1, 1e-3, 2e-3);
  kept.insert(kept.size() - 1, R"(, "min_s": 0.0015)");
  std::vector<KernelSample> samples =
      read_kernel_samples(write_temp("sol_calibration_cut.json", "[" + cut + "," + kept + "]"));
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_NE(samples[0].dropped.find("scheduler"), std::string::npos);
  EXPECT_TRUE(samples[1].dropped.empty());  // 2 ms against 1.5 ms: 1.33x
}

// The calibration reader takes bad numbers and deep nesting as the model's other readers do:
// a thread count past 32 bits is an error (not wrapped to 1), nesting past the bound is refused.
TEST(EfficiencyLayer, RecordsWithHugeIntegersOrDeepNestingAreRefused) {
  const std::string wrapped = record("rmsnorm", "tokens=16", "bf16", 1, 1e-3, 2e-3);
  std::string huge = wrapped;
  huge.replace(huge.find("\"threads\": 1"), 12, "\"threads\": 4294967297");
  test::expect_error([&] { read_kernel_samples(write_temp("sol_calibration_threads.json", "[" + huge + "]")); },
                     {"records[0]", "threads = 4294967297"});
  // A bare array's parse errors point into the file as written (no wrapper shifts them).
  test::expect_error([&] { read_kernel_samples(write_temp("sol_calibration_syntax.json", "[1, 2,, 3]")); },
                     {"sol_calibration_syntax.json", "line 1, column 7"});
  std::string deep = "[" + wrapped + ", " + std::string(200000, '[') + std::string(200000, ']') + "]";
  test::expect_error([&] { read_kernel_samples(write_temp("sol_calibration_deep.json", deep)); },
                     {"sol_calibration_deep.json"});
}

// A calibration made from a report reproduces that report's times: every class here ran at
// one fraction of its floor, so each record comes back exactly; a class whose records ran at
// different fractions comes back at its median.
TEST(EfficiencyLayer, CalibrationFromAReportReproducesItsTimes) {
  std::string report = R"({"machine": {}, "records": [)" +
      record("gemm", "m=16,n=7168,k=2048", "bf16->bf16", 1, 1e-3, 2e-3) + "," +
      record("gemm", "m=1,n=2048,k=7168", "bf16->bf16", 1, 2e-3, 4e-3) + "," +
      record("gemm", "m=4096,n=2048,k=2048", "bf16->bf16", 1, 9e-3, 1e-2) + "," +
      record("rmsnorm", "tokens=4096", "bf16", 1, 3e-3, 4e-3) + "," +
      record("copy", "bytes=64M", "bf16", 1, 6e-3, 8e-3) + "," +
      record("softmax", "tokens=4096", "f32", 2, 1e-3, 2e-3) + "," +
      record("layernorm", "tokens=4096", "bf16", 1, 1e-3, 5e-3, 1.6) + "]}";
  std::string path = write_temp("sol_calibration_round_trip.json", report);
  std::vector<KernelSample> samples = read_kernel_samples(path, 1);
  ASSERT_EQ(samples.size(), 6u);  // the two-thread softmax is filtered out
  EXPECT_NE(samples.back().dropped.find("moved"), std::string::npos);
  Efficiency e = efficiency_from_samples(samples, "t", path);
  EXPECT_EQ(e.rows.size(), 5u);
  for (const KernelSample& s : samples) {
    if (s.dropped.empty()) {
      EXPECT_NEAR(calibrated_time(e, s), s.time_s, 1e-12) << s.op << " " << s.shape;
    }
  }
  // Written out and read back, the layer is the same.
  Efficiency again = parse_efficiency(efficiency_json(e), "again");
  for (const KernelSample& s : samples) {
    if (s.dropped.empty()) {
      EXPECT_NEAR(calibrated_time(again, s), s.time_s, 1e-9);
    }
  }
  // The array `sol bench --json` prints reads the same way.
  std::string bench = "[";
  bench.append(record("gemm", "m=16,n=7168,k=2048", "bf16->bf16", 1, 1e-3, 3e-3)).append("]");
  EXPECT_EQ(read_kernel_samples(write_temp("sol_calibration_bench.json", bench)).size(), 1u);
  const std::string bad = write_temp("sol_cal_bad.json", R"({"records": [{"op": "x"}]})");
  expect_error([&] { read_kernel_samples(bad); }, {"records[0]", "missing key 'shape'"});
  std::string negative = "[";
  negative.append(record("copy", "s", "f32", 1, 1e-3, -1)).append("]");
  const std::string neg = write_temp("sol_cal_neg.json", negative);
  expect_error([&] { read_kernel_samples(neg); }, {"records[0]", "time_s"});
}

double number_before(const std::string& text, const std::string& unit) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(text, m, std::regex("([0-9.]+) " + unit))) << text;
  return std::stod(m[1]);
}

double shape_field(const std::string& shape, const std::string& key) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(shape, m, std::regex("(^|,)" + key + "=([0-9]+)"))) << shape;
  return std::stod(m[2]);
}

// Every row of the H800 anchors recomputed here from its published figure and its shape: the
// model's floor for that work on hardware/h800.json over the published time.
TEST(EfficiencyLayer, H800AnchorRowsFollowFromTheirPublishedFigures) {
  Efficiency e = load_efficiency(shipped("hardware/calibration", "h800-anchors"));
  HardwareSpec h800 = load_hardware_spec(shipped("hardware", "h800"));
  ModelConfig v3 = load_model_config(shipped("models", "deepseek-v3"));
  int checked = 0;
  for (const EfficiencyRow& r : e.rows) {
    EXPECT_TRUE(std::regex_search(r.source, std::regex(
        "github\\.com/deepseek-ai/(DeepGEMM|FlashMLA|DeepEP) [^ ]+ at commit [0-9a-f]{40}, line [0-9]+")))
        << r.source;
    double expected = 0;
    if (r.work.find("gemm.f8e4m3") != std::string::npos) {
      double groups = r.work.rfind("grouped", 0) == 0 ? shape_field(r.shape, "groups") : 1;
      double m = shape_field(r.shape, "m"), n = shape_field(r.shape, "n"), k = shape_field(r.shape, "k");
      double flops = 2 * groups * m * n * k;
      double bytes = groups * (m * k * 2 + n * k * 1 + m * n * 2);  // bf16 in and out, fp8 weights
      double floor = std::max(flops / h800.flops_fp8, bytes / h800.memory_bandwidth);
      expected = floor / (flops / (number_before(r.measured, "TFLOPS") * 1e12));
    } else if (r.work == "mla.decode.memory") {
      expected = number_before(r.measured, "GB/s") * 1e9 / h800.memory_bandwidth;
    } else if (r.work == "mla.decode.compute" || r.work == "attention.fwd") {
      expected = number_before(r.measured, "TFLOPS") * 1e12 / h800.flops_bf16;
    } else if (r.work.rfind("ep.", 0) == 0 && r.work.find(".decode") == std::string::npos) {
      bool up = r.work.find("scale_up") != std::string::npos;
      expected = number_before(r.measured, "GB/s") * 1e9 /
                 (up ? h800.scale_up_bandwidth : h800.scale_out_bandwidth);
    } else if (r.work.rfind("ep.", 0) == 0) {
      ParallelPlan p;
      p.ep = p.dp = int(shape_field(r.shape, "ep"));
      bool dispatch = r.work.find("dispatch") != std::string::npos;
      auto ops = model_detail::expert_all_to_all("moe.x", v3, h800, p, 128,
                                                 dispatch ? DType::f8e4m3 : DType::bf16);
      ASSERT_EQ(ops.size(), 2u);  // other nodes over IB, this node's peers over NVLink
      double floor = model_detail::op_time(ops[0], h800).floor_s();
      expected = floor / (number_before(r.measured, "us") * 1e-6);
    } else {
      ADD_FAILURE() << "row of unexpected class " << r.work;
    }
    EXPECT_NEAR(r.efficiency, expected, 1e-3) << r.work << " " << r.shape;
    ++checked;
  }
  EXPECT_EQ(checked, 49);
  EXPECT_NEAR(e.comm_sm_fraction, 24.0 / 132, 1e-3);
}

TEST(EfficiencyLayer, PredictionsDivideEachFloorByItsClassEfficiency) {
  ModelConfig v3 = load_model_config(shipped("models", "deepseek-v3"));
  HardwareSpec h800 = load_hardware_spec(shipped("hardware", "h800"));
  ParallelPlan plan = load_parallel_plan(shipped("plans", "deepseek-v3-decode-ep320-h800"));
  Workload chat = load_workload(shipped("workloads", "chat"));
  Prediction floor = predict(v3, h800, plan, chat);
  HardwareSpec calibrated = h800;
  auto e = std::make_shared<Efficiency>(load_efficiency(shipped("hardware/calibration", "h800-anchors")));
  calibrated.efficiency = e;
  Prediction cal = predict(v3, calibrated, plan, chat);
  ASSERT_EQ(floor.ops.size(), cal.ops.size());
  int calibrated_ops = 0;
  for (size_t i = 0; i < cal.ops.size(); ++i) {
    ASSERT_EQ(cal.ops[i].name, floor.ops[i].name);
    std::string used;
    double f = e->fraction(cal.ops[i].work, &used);
    EXPECT_NEAR(cal.ops[i].floor_s, floor.ops[i].floor_s / f, 1e-12 + 1e-9 * cal.ops[i].floor_s)
        << cal.ops[i].name << " " << cal.ops[i].work;
    calibrated_ops += used.empty() ? 0 : 1;
  }
  EXPECT_GT(calibrated_ops, 10);
  EXPECT_GT(cal.tpot_s, floor.tpot_s * 1.1);
  EXPECT_LT(cal.mfu, floor.mfu);
  // The decode GEMMs of 64 tokens per device are memory-bound skinny GEMMs; the absorbed MLA
  // attention is FlashMLA's work.
  bool saw_mla = false;
  for (const OpRecord& r : cal.ops) saw_mla |= r.work.rfind("mla.decode.", 0) == 0;
  EXPECT_TRUE(saw_mla);
  auto work_of = [](const Prediction& p, const std::string& phase, const std::string& op) {
    for (const OpRecord& r : p.ops)
      if (r.phase == phase && r.name == op) return r.work;
    return std::string("(no such op)");
  };
  // 64 sequences per device in two micro-batches: 32-row GEMMs; a prefill of 4 x 2048 fresh
  // tokens in two: 4096 rows; the routed experts of decode get 32 x 9 / 1 rows in one group.
  EXPECT_EQ(work_of(cal, "decode", "attn.q_a_proj"), "gemm.f8e4m3.decode");
  EXPECT_EQ(work_of(cal, "prefill", "attn.q_a_proj"), "gemm.f8e4m3.large");
  EXPECT_EQ(work_of(cal, "decode", "moe.experts_gate_up"), "grouped_gemm.f8e4m3.mid");
  EXPECT_EQ(work_of(cal, "decode", "moe.dispatch.scale_out"), "ep.dispatch.scale_out.decode");
  EXPECT_EQ(work_of(cal, "prefill", "moe.combine.scale_up"), "ep.combine.scale_up");
  EXPECT_EQ(work_of(cal, "decode", "attn.input_norm"), "memory");
  Prediction train = predict(v3, calibrated, load_parallel_plan(shipped("plans", "deepseek-v3-train-h800")),
                             load_workload(shipped("workloads", "pretrain-4k")));
  EXPECT_EQ(work_of(train, "forward", "attn.core"), "attention.fwd");
  EXPECT_EQ(work_of(train, "backward", "attn.core"), "attention.bwd");
  EXPECT_EQ(work_of(train, "forward", "pp.send_activations"), "pp.p2p");
  EXPECT_EQ(work_of(train, "gradient sync", "dp.grad_sync_dense"), "allreduce.scale_out");
}

TEST(EfficiencyLayer, CommunicationKernelsTakeSmsFromOverlappedComputation) {
  ModelConfig v3 = load_model_config(shipped("models", "deepseek-v3"));
  HardwareSpec h800 = load_hardware_spec(shipped("hardware", "h800"));
  // Links fast enough that the device binds every chunk.
  h800.scale_up_bandwidth = h800.scale_out_bandwidth = 1e14;
  ParallelPlan plan = load_parallel_plan(shipped("plans", "deepseek-v3-train-h800"));
  Workload w = load_workload(shipped("workloads", "pretrain-4k"));
  auto with_sms = [&](double share) {
    Efficiency e;
    e.rows = {row("gemm", 1.0)};  // every class at its floor
    e.comm_sm_fraction = share;
    HardwareSpec hw = h800;
    hw.efficiency = std::make_shared<Efficiency>(e);
    return predict(v3, hw, plan, w);
  };
  Prediction none = with_sms(0), some = with_sms(0.2);
  EXPECT_NEAR(none.step_s, predict(v3, h800, plan, w).step_s, 1e-9);
  // The chunks' computation runs on 80% of the SMs: 1 / 0.8 = 1.25x.
  EXPECT_NEAR(some.pipeline.f_s, none.pipeline.f_s * 1.25, 1e-9);
  EXPECT_NEAR(some.pipeline.fb_s, none.pipeline.fb_s * 1.25, 1e-9);
  EXPECT_GT(some.step_s, none.step_s * 1.2);
  // Without overlap nothing runs beside the computation: no SMs are taken.
  plan.overlap = false;
  EXPECT_NEAR(with_sms(0.2).pipeline.f_s, with_sms(0).pipeline.f_s, 1e-12);
}

}  // namespace
}  // namespace sol
