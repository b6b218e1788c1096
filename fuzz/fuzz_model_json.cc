// The co-design model's JSON readers: each input is read as a model config, a hardware spec,
// a parallel plan and a workload. Each either reads or throws sol::Error naming the file.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "sol/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const char* file = "fuzz.json";
  sol::fuzz::expect_clean([&] { sol::parse_model_config(text, file); }, {file});
  sol::fuzz::expect_clean([&] { sol::parse_hardware_spec(text, file); }, {file});
  sol::fuzz::expect_clean([&] { sol::parse_parallel_plan(text, file); }, {file});
  sol::fuzz::expect_clean([&] { sol::parse_workload(text, file); }, {file});
  return 0;
}
