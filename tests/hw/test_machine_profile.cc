#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

#include "hw/env_guard.h"
#include "sol/error.h"
#include "sol/hw.h"

namespace sol {
namespace {

using testing::EnvGuard;

// A profile for this machine's cache key with made-up, distinguishable rates.
MachineProfile synthetic_profile() {
  MachineProfile p;
  p.cpu_model = cpu_features().model_name;
  p.cores = cpu_features().logical_cpus;
  p.measured_at = "2024-05-01T12:34:56Z";
  p.measure_seconds = 11.5;
  double rate = 1e9;
  for (Unit u : kAllUnits) {
    Ceiling c;
    c.unit = u;
    c.available = u != Unit::amx_int8;
    c.note = c.available ? "measured with \"quotes\" and a\nnewline" : "AMX: not supported by CPU";
    c.one_thread = c.available ? rate : 0;
    c.all_threads = c.available ? 3.5 * rate : 0;
    c.threads = 4;
    rate *= 1.7;
    p.ceilings.push_back(c);
  }
  return p;
}

void expect_same(const MachineProfile& a, const MachineProfile& b) {
  EXPECT_EQ(a.cpu_model, b.cpu_model);
  EXPECT_EQ(a.cores, b.cores);
  EXPECT_EQ(a.measured_at, b.measured_at);
  EXPECT_DOUBLE_EQ(a.measure_seconds, b.measure_seconds);
  ASSERT_EQ(a.ceilings.size(), b.ceilings.size());
  for (size_t i = 0; i < a.ceilings.size(); ++i) {
    EXPECT_EQ(a.ceilings[i].unit, b.ceilings[i].unit);
    EXPECT_EQ(a.ceilings[i].available, b.ceilings[i].available);
    EXPECT_EQ(a.ceilings[i].note, b.ceilings[i].note);
    EXPECT_DOUBLE_EQ(a.ceilings[i].one_thread, b.ceilings[i].one_thread);
    EXPECT_DOUBLE_EQ(a.ceilings[i].all_threads, b.ceilings[i].all_threads);
    EXPECT_EQ(a.ceilings[i].threads, b.ceilings[i].threads);
  }
}

TEST(MachineProfile, JsonRoundTrip) {
  MachineProfile p = synthetic_profile();
  std::string text = p.to_json();
  EXPECT_NE(text.find("\"schema\""), std::string::npos);
  EXPECT_NE(text.find("\"units\": \"FLOP/s\""), std::string::npos);
  EXPECT_NE(text.find("\"units\": \"B/s\""), std::string::npos);
  expect_same(MachineProfile::from_json(text), p);
}

TEST(MachineProfile, FromJsonRestoresUnitOrder) {
  MachineProfile p = synthetic_profile();
  MachineProfile reversed = p;
  std::reverse(reversed.ceilings.begin(), reversed.ceilings.end());
  expect_same(MachineProfile::from_json(reversed.to_json()), p);
}

TEST(MachineProfile, ValueInterpolatesBetweenThreadCounts) {
  MachineProfile p = synthetic_profile();
  const Ceiling& fma = p.get(Unit::fma_f32);
  EXPECT_DOUBLE_EQ(p.value(Unit::fma_f32, 1), fma.one_thread);
  EXPECT_DOUBLE_EQ(p.value(Unit::fma_f32, 4), fma.all_threads);
  EXPECT_DOUBLE_EQ(p.value(Unit::fma_f32, 16), fma.all_threads);
  double third_of_the_way = fma.one_thread + (fma.all_threads - fma.one_thread) / 3;
  EXPECT_DOUBLE_EQ(p.value(Unit::fma_f32, 2), third_of_the_way);
  EXPECT_THROW(p.value(Unit::fma_f32, 0), Error);
  EXPECT_THROW(p.value(Unit::amx_int8, 1), Error) << "unavailable units have no value";
  MachineProfile empty;
  EXPECT_THROW(empty.get(Unit::clock), Error);
}

TEST(MachineProfile, CorruptJsonThrowsSolError) {
  MachineProfile p = synthetic_profile();
  std::string good = p.to_json();
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  const std::string bad_inputs[] = {
      "",
      "not json",
      "[1, 2]",
      good.substr(0, good.size() / 2),
      replaced("\"schema\": 3", "\"schema\": 99"),
      replaced("\"cpu_model\"", "\"cpu\""),
      replaced("\"cores\": " + std::to_string(p.cores), "\"cores\": \"many\""),
      replaced("\"unit\": \"fma_f32\"", "\"unit\": \"fma_f64\""),
      replaced("\"unit\": \"dot_bf16\"", "\"unit\": \"fma_f32\""),
      replaced("\"units\": \"FLOP/s\"", "\"units\": \"GFLOP/s\""),
      replaced("\"one_thread\": 1000000000.0", "\"one_thread\": -1.0"),
      replaced("\"ceilings\": [", "\"ceilings\": {\"x\": ["),
  };
  for (const std::string& text : bad_inputs)
    EXPECT_THROW(MachineProfile::from_json(text), Error) << text.substr(0, 200);
}

// Each cache test writes below its own temp directory through XDG_CACHE_HOME.
class MachineCache : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/sol_machine_cache_XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    xdg_.emplace("XDG_CACHE_HOME", dir_.c_str());
  }
  void TearDown() override {
    xdg_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string cache_file() const { return dir_ + "/sol/machine.json"; }
  void write_cache(const std::string& text) {
    std::filesystem::create_directories(dir_ + "/sol");
    std::ofstream(cache_file()) << text;
  }
  std::string read_cache() const {
    std::stringstream s;
    s << std::ifstream(cache_file()).rdbuf();
    return s.str();
  }
  std::string dir_;
  std::optional<EnvGuard> xdg_;
};

TEST_F(MachineCache, PathFollowsXdgThenHome) {
  EXPECT_EQ(machine_cache_path(), cache_file());
  EnvGuard relative("XDG_CACHE_HOME", "relative/dir");
  EnvGuard home("HOME", "/home/someone");
  EXPECT_EQ(machine_cache_path(), "/home/someone/.cache/sol/machine.json");
  EnvGuard no_home("HOME", nullptr);
  EXPECT_THROW(machine_cache_path(), Error);
}

TEST_F(MachineCache, SaveThenLoad) {
  EXPECT_FALSE(load_cached_machine().has_value()) << "nothing saved yet";
  MachineProfile p = synthetic_profile();
  save_cached_machine(p);
  std::optional<MachineProfile> loaded = load_cached_machine();
  ASSERT_TRUE(loaded.has_value());
  expect_same(*loaded, p);
  for (const auto& entry : std::filesystem::directory_iterator(dir_ + "/sol"))
    EXPECT_EQ(entry.path().filename(), "machine.json") << "no temp file left behind";
}

TEST_F(MachineCache, KeepsOtherMachinesAndIgnoresThem) {
  MachineProfile other = synthetic_profile();
  other.cpu_model = "Some Other CPU";
  save_cached_machine(other);
  EXPECT_FALSE(load_cached_machine().has_value()) << "another machine's entry";
  save_cached_machine(synthetic_profile());
  EXPECT_TRUE(load_cached_machine().has_value());
  EXPECT_NE(read_cache().find("Some Other CPU|"), std::string::npos);
}

TEST_F(MachineCache, CorruptFileIsIgnoredWithAWarningAndReplaced) {
  write_cache("{ this is not json");
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(load_cached_machine().has_value());
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("corrupt"), std::string::npos) << warning;
  EXPECT_NE(warning.find(cache_file()), std::string::npos) << warning;

  ::testing::internal::CaptureStderr();
  save_cached_machine(synthetic_profile());
  ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(load_cached_machine().has_value());
}

TEST_F(MachineCache, StaleEntryIsIgnoredWithAWarning) {
  MachineProfile p = synthetic_profile();
  std::string key = p.cpu_model + "|" + std::to_string(p.cores);
  write_cache("{\"" + key + "\": {\"schema\": 0}}");
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(load_cached_machine().has_value());
  std::string warning = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warning.find("schema"), std::string::npos) << warning;
}

TEST_F(MachineCache, LoadOrMeasureUsesTheCache) {
  MachineProfile p = synthetic_profile();
  save_cached_machine(p);
  bool measured = false;
  MachineProfile got = load_or_measure_machine(false, [&](Unit) { measured = true; });
  EXPECT_FALSE(measured);
  expect_same(got, p);
}

}  // namespace
}  // namespace sol

namespace sol {
namespace {

// The fp8 tensor-core unit is a GPU's: on the CPU it is unavailable, with the reason, and a
// profile cached before it existed still loads (and is not measured again).
MachineProfile without(MachineProfile p, Unit u) {
  p.ceilings.erase(std::remove_if(p.ceilings.begin(), p.ceilings.end(), [&](const Ceiling& c) { return c.unit == u; }),
                   p.ceilings.end());
  return p;
}

TEST(DeviceOnlyUnit, Fp8TensorCoresAreNamedAndUnavailableOnTheCpu) {
  EXPECT_EQ(unit_name(Unit::mma_fp8), "mma_fp8");
  EXPECT_EQ(parse_unit("mma_fp8"), Unit::mma_fp8);
  EXPECT_EQ(unit_label(Unit::mma_fp8), "GFLOP/s");
  EXPECT_FALSE(unit_is_memory(Unit::mma_fp8));
  EXPECT_TRUE(unit_is_device_only(Unit::mma_fp8));
  for (Unit u : kAllUnits) EXPECT_EQ(unit_is_device_only(u), u == Unit::mma_fp8) << unit_name(u);
  const Ceiling c = measure_ceiling(Unit::mma_fp8, 1, 0.01);
  EXPECT_FALSE(c.available);
  EXPECT_EQ(c.note, device_only_ceiling(Unit::mma_fp8).note);
  EXPECT_NE(c.note.find("no CPU"), std::string::npos) << c.note;
  EXPECT_THROW(device_only_ceiling(Unit::dot_bf16), Error);
  MachineProfile m = synthetic_profile();
  for (Ceiling& x : m.ceilings)
    if (x.unit == Unit::mma_fp8) x = device_only_ceiling(Unit::mma_fp8);
  try {
    m.value(Unit::mma_fp8, 1);
    ADD_FAILURE() << "an unavailable unit has no value";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mma_fp8 is not available"), std::string::npos) << e.what();
  }
}

TEST(DeviceOnlyUnit, AProfileWrittenBeforeTheFp8UnitStillReads) {
  const MachineProfile old = without(synthetic_profile(), Unit::mma_fp8);
  ASSERT_EQ(old.to_json().find("mma_fp8"), std::string::npos);
  const MachineProfile read = MachineProfile::from_json(old.to_json());
  ASSERT_EQ(read.ceilings.size(), std::size(kAllUnits));
  for (size_t i = 0; i < read.ceilings.size(); ++i) EXPECT_EQ(read.ceilings[i].unit, kAllUnits[i]);
  const Ceiling& fp8 = read.get(Unit::mma_fp8);
  EXPECT_FALSE(fp8.available);
  EXPECT_EQ(fp8.note, device_only_ceiling(Unit::mma_fp8).note);
  EXPECT_DOUBLE_EQ(read.get(Unit::dot_bf16).one_thread, synthetic_profile().get(Unit::dot_bf16).one_thread);
  // Written again, it carries the unit; read again, the same.
  const MachineProfile again = MachineProfile::from_json(read.to_json());
  expect_same(again, read);
  // Any other unit missing still means the file must be measured again.
  try {
    MachineProfile::from_json(without(synthetic_profile(), Unit::dot_s8).to_json());
    ADD_FAILURE() << "a profile without dot_s8 read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no ceiling for dot_s8"), std::string::npos) << e.what();
  }
}

TEST_F(MachineCache, ACacheWithoutTheFp8UnitIsUsedNotRemeasured) {
  save_cached_machine(without(synthetic_profile(), Unit::mma_fp8));
  ASSERT_EQ(read_cache().find("mma_fp8"), std::string::npos);
  ::testing::internal::CaptureStderr();
  // Measuring would take minutes: the first progress call stops it and fails the test.
  MachineProfile got;
  try {
    got = load_or_measure_machine(false, [](Unit u) { throw std::runtime_error(std::string(unit_name(u))); });
  } catch (const std::runtime_error& e) {
    ::testing::internal::GetCapturedStderr();
    FAIL() << "the cache was not used: measuring began with " << e.what();
  }
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(warnings, "");
  EXPECT_FALSE(got.get(Unit::mma_fp8).available);
  EXPECT_DOUBLE_EQ(got.get(Unit::mem_read).all_threads, synthetic_profile().get(Unit::mem_read).all_threads);
}

}  // namespace
}  // namespace sol
