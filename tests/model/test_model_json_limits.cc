// Numbers and bytes in the model's JSON inputs that once got past the readers: integers
// narrowed to 32 bits (dp 4294967297 read as 1, micro_batches 2^32 read as 0 and divided by),
// numbers beyond a double escaping as nlohmann exceptions ("internal error"), a directory read
// as an empty file, raw bytes echoed. Each is now a sol::Error naming the file and the key.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "hw/flat_profile.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/model.h"
#include "sol/model_loop.h"

namespace sol {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a sol::Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected sol::Error";
  return "";
}

void expect_contains(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(message.find(p), std::string::npos) << message << "\n(missing: " << p << ")";
}

std::string plan(const std::string& extra) { return R"({"name": "p", "devices": 1)" + extra + "}"; }

std::string hardware(const std::string& devices) {
  return R"({"name": "h", "confidence": "high",
    "flops": {"bf16_tflops": 1, "fp8_tflops": 1, "f32_tflops": 1, "source": "s"},
    "memory": {"capacity_gb": 1, "bandwidth_gb_s": 1, "source": "s"},
    "scale_up": {"devices": )" + devices + R"(, "bandwidth_gb_s": 1, "latency_us": 1, "source": "s"},
    "scale_out": {"bandwidth_gb_s": 1, "latency_us": 1, "source": "s"}})";
}

TEST(ModelJsonLimits, IntegersAreRangeCheckedBeforeNarrowing) {
  EXPECT_NO_THROW(parse_parallel_plan(plan(""), "p.json"));
  // dp 2^32 + 1 was taken as 1, and dp x tp x pp = 1 matched devices.
  expect_contains(error_of([] { parse_parallel_plan(plan(R"(, "dp": 4294967297)"), "p.json"); }),
                  {"p.json", "key 'dp'", "expected an integer >= 1 and <= 2147483647", "got 4294967297"});
  expect_contains(error_of([] { parse_parallel_plan(plan(R"(, "micro_batches": 4294967296)"), "p.json"); }),
                  {"p.json", "key 'micro_batches'", "expected an integer >= 1 and <= 65536"});
  expect_contains(error_of([] { parse_parallel_plan(plan(R"(, "zero_stage": 4294967296)"), "p.json"); }),
                  {"p.json", "key 'zero_stage'", "expected an integer >= 0 and <= 3"});
  expect_contains(error_of([] { parse_parallel_plan(plan(R"(, "zero_stage": 4)"), "p.json"); }),
                  {"key 'zero_stage'", "<= 3"});
  // Above INT64_MAX nlohmann keeps an unsigned integer, which read as int64 wraps.
  expect_contains(error_of([] { parse_parallel_plan(plan(R"(, "tp": 18446744073709551615)"), "p.json"); }),
                  {"p.json", "key 'tp'", "got 18446744073709551615"});
  expect_contains(error_of([] { parse_parallel_plan(R"({"name": "p", "devices": 9223372036854775808})", "p.json"); }),
                  {"p.json", "key 'devices'"});
  for (const char* devices : {"4294967296", "2147483648"})
    expect_contains(error_of([&] { parse_hardware_spec(hardware(devices), "h.json"); }),
                    {"h.json scale_up", "key 'devices'", "expected an integer >= 1 and <= 2147483647"});
  EXPECT_EQ(parse_hardware_spec(hardware("2147483647"), "h.json").scale_up_size, 2147483647);
}

TEST(ModelJsonLimits, NumbersBeyondADoubleAreAnErrorNamingTheFile) {
  for (const std::string& text : {hardware("8").replace(hardware("8").find("\"bf16_tflops\": 1"), 16,
                                                        "\"bf16_tflops\": 1e400"),
                                  plan(R"(, "expert_load_imbalance": -1e400)")}) {
    const std::string m = error_of([&] {
      parse_hardware_spec(text, "x.json");
      parse_parallel_plan(text, "x.json");
    });
    expect_contains(m, {"x.json", "not valid JSON", "number overflow"});
  }
}

TEST(ModelJsonLimits, DeepNestingIsAnErrorNotAStackOverflow) {
  // 200,000 nested arrays as a key's value: printing it for the message recursed per level.
  const std::string deep = plan(R"(, "dp": )" + std::string(200000, '[') + std::string(200000, ']'));
  expect_contains(error_of([&] { parse_parallel_plan(deep, "p.json"); }),
                  {"p.json", "not valid JSON: nested deeper than 64 levels"});
  // 60 levels are read, then refused by the key's type.
  expect_contains(error_of([&] {
                    parse_parallel_plan(plan(R"(, "description": )" + std::string(60, '[') + std::string(60, ']')),
                                        "p.json");
                  }),
                  {"p.json", "key 'description': expected a string"});
}

// sol model loop's report.json: nesting dumped recursively, threads read with get<int>.
TEST(ModelJsonLimits, LoopReportIsReadLikeTheOtherInputs) {
  const std::string path = std::filesystem::temp_directory_path() / ("sol_loop_" + std::to_string(getpid()) + ".json");
  const auto load = [&](const std::string& text) {
    std::ofstream(path) << text;
    MachineProfile machine;
    std::vector<LoopRecord> ops;
    return error_of([&] { read_loop_records(path, machine, ops); });
  };
  expect_contains(load(R"({"machine": )" + std::string(100000, '[') + std::string(100000, ']') + R"(, "records": []})"),
                  {path.c_str(), "nested deeper than 64 levels"});
  expect_contains(load(R"({"machine": )" + testing_hw::flat_profile(1e9, 2e9).to_json() + R"(, "records": [{"op": "copy", "shape": "n=1", "dtype": "f32",
                          "threads": 4294967297, "flops": 0, "bytes": 8, "compute_unit": "fma_f32",
                          "memory_unit": "mem_copy", "time_s": 1}]})"),
                  {"records[0]", "threads = 4294967297 is not in [1, 4096]"});
  std::filesystem::remove(path);
}

TEST(ModelJsonLimits, ADirectoryIsNamedAsOne) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  expect_contains(error_of([&] { load_model_config(dir + "/"); }), {"is a directory, not a JSON file"});
  expect_contains(error_of([&] { load_parallel_plan(dir + "/"); }), {"is a directory"});
}

TEST(ModelJsonLimits, MessagesEchoNoRawBytes) {
  // A key holding a control character (legal JSON, escaped), then a malformed UTF-8 byte.
  for (const std::string& text : {plan(R"(, "d\u0001p": 1)"), plan(", \"d\xc3p\": 1")}) {
    const std::string m = error_of([&] { parse_parallel_plan(text, "p.json"); });
    EXPECT_NE(m.find("p.json"), std::string::npos) << m;
    for (char c : m) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << m;
  }
  expect_contains(error_of([] { parse_parallel_plan(plan(R"(, "d\u0001p": 1)"), "p.json"); }),
                  {"unknown key 'd\\u0001p'"});
}

}  // namespace
}  // namespace sol
