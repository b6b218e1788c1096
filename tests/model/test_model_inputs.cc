// Strict parsing of the JSON inputs and the shapes they describe.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "model_files.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol {
namespace {

using test::expect_error;
using test::shipped;

TEST(ModelInputs, DeepSeekV3ShapeAndParameterCounts) {
  ModelConfig m = load_model_config(shipped("models", "deepseek-v3"));
  EXPECT_TRUE(m.is_mla());
  EXPECT_TRUE(m.is_moe());
  EXPECT_EQ(m.routed_experts, 256);
  EXPECT_EQ(m.shared_experts, 1);
  EXPECT_EQ(m.experts_per_token, 8);
  EXPECT_EQ(m.moe_layer_count(), 58);  // 61 layers, the first 3 dense
  EXPECT_EQ(m.mtp_layers, 1);
  // The technical report: 671B total, 37B activated per token (MTP module excluded).
  EXPECT_NEAR(m.total_params() / 1e9, 671, 671 * 0.01);
  EXPECT_NEAR(m.activated_params() / 1e9, 37, 37 * 0.02);
}

TEST(ModelInputs, DenseAndGqaMoeParameterCounts) {
  ModelConfig llama = load_model_config(shipped("models", "llama-3-70b"));
  EXPECT_FALSE(llama.is_moe());
  EXPECT_NEAR(llama.total_params() / 1e9, 70.6, 0.5);
  ModelConfig qwen = load_model_config(shipped("models", "qwen3-235b-a22b"));
  EXPECT_EQ(qwen.routed_experts, 128);
  EXPECT_EQ(qwen.moe_layer_count(), 94);
  EXPECT_NEAR(qwen.total_params() / 1e9, 235, 235 * 0.01);
  EXPECT_NEAR(qwen.activated_params() / 1e9, 22, 22 * 0.02);
}

TEST(ModelInputs, EveryShippedFileParses) {
  for (const std::string& m : test::all_shipped("models"))
    EXPECT_NO_THROW(load_model_config(shipped("models", m))) << m;
  for (const std::string& h : test::all_shipped("hardware")) {
    HardwareSpec hw = load_hardware_spec(shipped("hardware", h));
    EXPECT_GT(hw.flops_bf16, 0) << h;
    EXPECT_FALSE(hw.source.empty()) << h;
  }
  for (const std::string& p : test::all_shipped("plans"))
    EXPECT_NO_THROW(load_parallel_plan(shipped("plans", p))) << p;
  for (const std::string& w : test::all_shipped("workloads"))
    EXPECT_NO_THROW(load_workload(shipped("workloads", w))) << w;
  EXPECT_GE(test::all_shipped("hardware").size(), 6u);
  EXPECT_EQ(load_hardware_spec(shipped("hardware", "ascend-910b")).confidence, "low");
  EXPECT_EQ(load_parallel_plan(shipped("plans", "deepseek-v3-train-h800")).devices(), 2048);
  EXPECT_EQ(load_workload(shipped("workloads", "chat")).kind, Workload::Kind::inference);
}

TEST(ModelInputs, UnknownMissingAndMistypedKeysNameFileKeyExpectedAndGot) {
  const char* base = R"({"name": "x", "source": "s", "hidden_size": 64, "num_hidden_layers": 2,
      "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 100)";
  EXPECT_NO_THROW(parse_model_config(std::string(base) + "}", "m.json"));
  expect_error([&] { parse_model_config(std::string(base) + R"(, "hiden_size": 3})", "m.json"); },
               {"m.json", "unknown key 'hiden_size'"});
  expect_error([&] { parse_model_config(R"({"name": "x", "source": "s"})", "m.json"); },
               {"m.json", "missing key 'hidden_size'", "expected an integer"});
  expect_error(
      [&] {
        parse_model_config(R"({"name": "x", "source": "s", "hidden_size": "64"})", "m.json");
      },
      {"m.json", "key 'hidden_size'", "expected an integer >= 1", "got \"64\" (string)"});
  expect_error([&] { parse_model_config("{not json", "m.json"); }, {"m.json", "not valid JSON"});
}

TEST(ModelInputs, PlanMustDivideItsDevices) {
  expect_error([] { parse_parallel_plan(R"({"name": "p", "devices": 64, "dp": 3, "tp": 8})", "p.json"); },
               {"p.json", "dp x tp x pp = 3 x 8 x 1 = 24 but devices = 64"});
  expect_error(
      [] { parse_parallel_plan(R"({"name": "p", "devices": 8, "dp": 8, "ep": 3})", "p.json"); },
      {"p.json", "ep = 3 must divide dp x tp = 8"});
  expect_error(
      [] { parse_parallel_plan(R"({"name": "p", "devices": 8, "dp": 8, "schedule": "gpipe"})", "p.json"); },
      {"key 'schedule'", "\"1f1b\", \"zb1p\" or \"dualpipe\""});
  expect_error(
      [] { parse_parallel_plan(R"({"name": "p", "devices": 8, "dp": 8, "dtypes": {"gemm": "fp7"}})", "p.json"); },
      {"key 'gemm'", "a dtype"});
}

TEST(ModelInputs, PlanChecksAgainstModelAndHardware) {
  ModelConfig llama = load_model_config(shipped("models", "llama-3-70b"));
  HardwareSpec ascend = load_hardware_spec(shipped("hardware", "ascend-910b"));
  Workload chat = load_workload(shipped("workloads", "chat"));
  ParallelPlan p;
  p.name = "t";
  p.tp = 3;
  expect_error([&] { validate_plan(llama, ascend, p, chat); }, {"tp = 3 must divide num_attention_heads = 64"});
  p.tp = 1;
  p.ep = 2;
  expect_error([&] { validate_plan(llama, ascend, p, chat); }, {"ep = 2", "has no experts"});
  p.ep = 1;
  p.gemm_dtype = DType::f8e4m3;
  expect_error([&] { validate_plan(llama, ascend, p, chat); }, {"ascend-910b", "no f8e4m3 matrix peak"});
}

TEST(ModelInputs, PlanFileErrorsNameTheFileAndTheKey) {
  ModelConfig llama = load_model_config(shipped("models", "llama-3-70b"));
  HardwareSpec h100 = load_hardware_spec(shipped("hardware", "h100"));
  Workload train = load_workload(shipped("workloads", "pretrain-4k-small"));
  ParallelPlan p = parse_parallel_plan(R"({"name": "short", "devices": 64, "dp": 8, "pp": 8,
      "schedule": "dualpipe", "micro_batches": 8})", "plans/short.json");
  expect_error([&] { validate_plan(llama, h100, p, train); },
               {"plans/short.json (plan short)", "micro_batches = 8", "at least 2 x pp"});
  p = parse_parallel_plan(R"({"name": "odd-tp", "devices": 48, "dp": 8, "tp": 6})", "plans/odd.json");
  expect_error([&] { validate_plan(llama, h100, p, train); },
               {"plans/odd.json (plan odd-tp)", "tp = 6 must divide num_attention_heads = 64"});
}

TEST(ModelInputs, ModelThatDoesNotFitSaysWhatItNeeds) {
  ModelConfig v3 = load_model_config(shipped("models", "deepseek-v3"));
  HardwareSpec h100 = load_hardware_spec(shipped("hardware", "h100"));
  ParallelPlan one;  // a single GPU
  one.name = "single";
  expect_error([&] { predict(v3, h100, one, load_workload(shipped("workloads", "chat"))); },
               {"does not fit", "plan single", "GB per device", "h100 has 80 GB"});
}

TEST(ModelInputs, NoDefaultPlanSaysHowCloseTheBestCame) {
  ModelConfig v3 = load_model_config(shipped("models", "deepseek-v3"));
  HardwareSpec small;  // one 24 GB device, no links: DeepSeek-V3 cannot fit
  small.name = "small";
  small.flops_bf16 = 1e12;
  small.flops_f32 = 1e11;
  small.memory_bandwidth = 1e11;
  small.memory_bytes = 24e9;
  expect_error([&] { default_plan(v3, small, load_workload(shipped("workloads", "chat"))); },
               {"no default plan fits deepseek-v3 on small", "24 GB per device",
                "the closest, dp 1 tp 1 pp 1 ep 1, needs", "kv cache"});
}

TEST(ModelInputs, ThisMachineFromItsMeasuredProfile) {
  MachineProfile profile;
  profile.cpu_model = "test cpu";
  for (Unit u : kAllUnits) {
    Ceiling c;
    c.unit = u;
    c.available = u != Unit::amx_bf16 && u != Unit::amx_int8;
    c.all_threads = u == Unit::mem_read ? 30e9 : 300e9;
    profile.ceilings.push_back(c);
  }
  HardwareSpec hw = hardware_from_machine(profile);
  EXPECT_EQ(hw.name, "this");
  EXPECT_DOUBLE_EQ(hw.flops_bf16, 300e9);  // AVX512-BF16 when AMX is absent
  EXPECT_DOUBLE_EQ(hw.memory_bandwidth, 30e9);
  EXPECT_GT(hw.memory_bytes, 0);
  EXPECT_THROW(hw.flops(DType::f8e4m3), Error);
}

}  // namespace
}  // namespace sol
