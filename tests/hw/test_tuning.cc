// The tuning context: defaults from the caches, the core's shape, tuning.json (round trip,
// corrupt, stale, another CPU, out-of-range values), SOL_TUNING, ScopedTuning, tune_case.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "env_guard.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/tuning.h"

namespace sol {
namespace {

using testing::EnvGuard;

CoreShape shape(long l1, long l2, long l3) {
  CoreShape s;
  s.microarch = "test";
  s.l1d_bytes = l1, s.l2_bytes = l2, s.l3_bytes = l3;
  return s;
}

struct TempFile {
  std::string path;
  explicit TempFile(const char* name)
      : path((std::filesystem::temp_directory_path() / (std::string("sol_tuning_") + name + "_" +
                                                         std::to_string(::getpid()) + ".json"))
                 .string()) {
    std::filesystem::remove(path);
  }
  ~TempFile() { std::filesystem::remove(path); }
  void write(const std::string& text) const { std::ofstream(path) << text; }
};

TEST(Tuning, DefaultsFollowTheCaches) {
  const TuningParams zen5 = default_tuning_params(shape(48 << 10, 1 << 20, 32 << 20));
  EXPECT_EQ(zen5.gemm_mc, 240);   // 256 rows x 4 KiB fill L2, down to a multiple of 48
  EXPECT_EQ(zen5.gemm_nc, 2048);  // 8 MiB = L3/4
  EXPECT_EQ(zen5.gemm_b_prefetch_bytes, 16384);  // L1d/3
  EXPECT_EQ(default_tuning_params(shape(32 << 10, 1 << 20, 32 << 20)).gemm_b_prefetch_bytes, 8192);  // Zen 4
  EXPECT_EQ(zen5.stream_min_bytes, 4 << 20);  // 4 x L2 under LLC/2
  EXPECT_EQ(default_tuning_params(shape(48 << 10, 1 << 20, 6 << 20)).stream_min_bytes, 3 << 20);  // LLC/2
  const TuningParams big = default_tuning_params(shape(48 << 10, 2 << 20, 300L << 20));
  EXPECT_EQ(big.gemm_mc, 480);
  EXPECT_EQ(big.gemm_amx_mc, 256);   // 256 rows x 4 KiB fill half of L2, a multiple of 32
  EXPECT_EQ(zen5.gemm_amx_mc, 128);
  EXPECT_EQ(big.gemm_nc, 4096);  // clamped
  EXPECT_EQ(big.stream_min_bytes, 8 << 20);  // a guest's reported 300 MiB L3 is not all its own
  // The row kernels' look-ahead from L1d: the distances the kernels held as constants on a
  // 48 KiB L1, shorter on Zen 4's 32 KiB.
  EXPECT_EQ(zen5.row_prefetch_bytes, 2048);       // L1d/24
  EXPECT_EQ(zen5.pass_prefetch_bytes, 8192);      // L1d/6
  EXPECT_EQ(zen5.pass_l2_prefetch_bytes, 16384);  // L1d/3
  EXPECT_EQ(zen5.rope_prefetch_heads, 64);        // L1d/768
  EXPECT_EQ(zen5.rope_l2_prefetch_heads, 128);    // twice that
  EXPECT_EQ(zen5.rope_pair_tokens, 1);
  EXPECT_EQ(zen5.quant_pipeline_groups, 3);
  const TuningParams zen4 = default_tuning_params(shape(32 << 10, 1 << 20, 32 << 20));
  EXPECT_EQ(zen4.row_prefetch_bytes, 1024);
  EXPECT_EQ(zen4.pass_prefetch_bytes, 4096);
  EXPECT_EQ(zen4.pass_l2_prefetch_bytes, 8192);
  EXPECT_EQ(zen4.rope_prefetch_heads, 42);
  EXPECT_EQ(zen4.rope_l2_prefetch_heads, 84);
  const TuningParams tiny = default_tuning_params(shape(16 << 10, 128 << 10, 0));
  EXPECT_NO_THROW(validate_tuning_params(tiny));
  EXPECT_NO_THROW(validate_tuning_params(zen4));
  EXPECT_NO_THROW(validate_tuning_params(zen5));
  EXPECT_NO_THROW(validate_tuning_params(big));
}

TEST(Tuning, CoreShapeNamesTheDatapath) {
  CpuFeatures f;
  f.vendor = "AuthenticAMD";
  f.avx512f = f.os_avx512 = f.avx2 = true;
  EXPECT_EQ(core_shape_of(f, 0x19, 0x11).microarch, "zen4");
  EXPECT_EQ(core_shape_of(f, 0x19, 0x11).datapath_bits, 256);
  EXPECT_EQ(core_shape_of(f, 0x1A, 0x02).microarch, "zen5");
  EXPECT_EQ(core_shape_of(f, 0x1A, 0x02).datapath_bits, 512);
  // Zen's bf16 dot product does twice an FMA's work; Intel's issues at half two FMA pipes' rate.
  EXPECT_FALSE(core_shape_of(f, 0x19, 0x11).bf16_by_fma);
  EXPECT_FALSE(core_shape_of(f, 0x1A, 0x02).bf16_by_fma);
  f.vendor = "GenuineIntel";
  EXPECT_EQ(core_shape_of(f, 6, 0xCF).datapath_bits, 512);
  EXPECT_TRUE(core_shape_of(f, 6, 0xCF).bf16_by_fma);
  f.avx512f = false;
  EXPECT_EQ(core_shape_of(f, 6, 0x9A).datapath_bits, 256);
  EXPECT_FALSE(core_shape_of(f, 6, 0x9A).bf16_by_fma);
  EXPECT_GT(core_shape_of(f, 6, 0x9A).l2_bytes, 0);  // a fallback when the OS reports none
}

TEST(Tuning, ValidationNamesTheParameter) {
  TuningParams p = default_tuning_params(core_shape());
  p.gemm_mc = 100;  // not a multiple of 48
  try {
    validate_tuning_params(p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gemm_mc = 100"), std::string::npos) << e.what();
  }
  p = default_tuning_params(core_shape());
  p.stream_min_bytes = 0;
  EXPECT_THROW(validate_tuning_params(p), Error);
  EXPECT_THROW(ScopedTuning{p}, Error);
}

TuneOutcome outcome(const char* param, int64_t value, int64_t def, double speedup) {
  TuneOutcome o;
  o.param = param;
  o.value = value;
  o.default_value = def;
  o.speedup = speedup;
  o.workload = "test workload";
  o.medians = {{value, 1.0}, {def, speedup}};
  return o;
}

TEST(Tuning, CacheRoundTripsPerCpu) {
  TempFile f("roundtrip");
  const CoreShape core = shape(48 << 10, 1 << 20, 32 << 20);
  save_tuning(f.path, "cpu A", {outcome("gemm_mc", 384, 240, 1.14), outcome("stream_min_bytes", 4 << 20, 16 << 20, 1.6)});
  save_tuning(f.path, "cpu B", {outcome("gemm_mc", 96, 240, 1.2)});
  const Tuning a = load_tuning(f.path, "cpu A", core, "cached");
  EXPECT_TRUE(a.messages.empty());
  EXPECT_EQ(a.params.gemm_mc, 384);
  EXPECT_EQ(a.params.stream_min_bytes, 4 << 20);
  EXPECT_EQ(a.params.gemm_nc, 2048);  // not tuned: the default
  EXPECT_NE(a.source.find("tuned"), std::string::npos);
  bool found = false;
  for (const TuningChoice& c : a.choices)
    if (c.name == "gemm_mc") {
      found = true;
      EXPECT_TRUE(c.tuned);
      EXPECT_EQ(c.default_value, 240);
      EXPECT_DOUBLE_EQ(c.speedup, 1.14);
      EXPECT_EQ(c.workload, "test workload");
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(load_tuning(f.path, "cpu B", core, "cached").params.gemm_mc, 96);
  const Tuning c = load_tuning(f.path, "cpu C", core, "cached");  // not tuned there
  EXPECT_EQ(c.params, default_tuning_params(core));
  EXPECT_TRUE(c.messages.empty());
  const Tuning d = load_tuning(f.path, "cpu A", core, "defaults");  // SOL_TUNING=defaults
  EXPECT_EQ(d.params, default_tuning_params(core));
  EXPECT_NE(d.source.find("SOL_TUNING=defaults"), std::string::npos);
}

// Whatever is wrong with the file, the defaults apply and a message says why.
TEST(Tuning, CorruptOrStaleCacheFallsBackWithAMessage) {
  TempFile f("bad");
  const CoreShape core = shape(48 << 10, 1 << 20, 32 << 20);
  const TuningParams def = default_tuning_params(core);
  auto expect_fallback = [&](const std::string& text, const std::string& why) -> std::string {
    f.write(text);
    const Tuning t = load_tuning(f.path, "cpu A", core, "cached");
    EXPECT_EQ(t.params, def) << why;
    EXPECT_EQ(t.messages.size(), 1u) << why;
    if (t.messages.empty()) return "";
    EXPECT_NE(t.messages[0].find(f.path), std::string::npos) << t.messages[0];
    EXPECT_NE(t.messages[0].find("defaults apply"), std::string::npos) << t.messages[0];
    return t.messages[0];
  };
  expect_fallback("{\"truncated\": ", "truncated JSON");
  expect_fallback("[1, 2]", "not an object");
  save_tuning(f.path, "cpu A", {outcome("gemm_mc", 384, 240, 1.1)});
  std::string good;
  {
    std::ifstream in(f.path);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  EXPECT_NE(expect_fallback(edited("\"schema\": 4", "\"schema\": 3"), "old schema").find("stale"), std::string::npos);
  EXPECT_NE(expect_fallback(edited("\"cpu_identity\": \"cpu A\"", "\"cpu_identity\": \"cpu Z\""), "other CPU")
                .find("another CPU"),
            std::string::npos);
  EXPECT_NE(expect_fallback(edited("\"gemm_mc\"", "\"gemm_mr\""), "unknown parameter").find("gemm_mr"),
            std::string::npos);
  EXPECT_NE(expect_fallback(edited("\"value\": 384", "\"value\": 385"), "off its multiple").find("gemm_mc = 385"),
            std::string::npos);
  expect_fallback(edited("\"value\": 384", "\"value\": \"384\""), "a string value");
}

TEST(Tuning, ModeFromTheEnvironment) {
  {
    EnvGuard e("SOL_TUNING", nullptr);
    EXPECT_EQ(tuning_mode(), "cached");
  }
  {
    EnvGuard e("SOL_TUNING", "defaults");
    EXPECT_EQ(tuning_mode(), "defaults");
  }
  {
    EnvGuard e("SOL_TUNING", "fastest");
    EXPECT_THROW(tuning_mode(), Error);
  }
}

TEST(Tuning, ScopedTuningNestsAndRestores) {
  const TuningParams before = tuning().params;
  TuningParams p = before;
  p.gemm_mc = 96;
  {
    ScopedTuning outer(p);
    EXPECT_EQ(tuning().params.gemm_mc, 96);
    TuningParams q = p;
    q.gemm_mc = 48;
    {
      ScopedTuning inner(q);
      EXPECT_EQ(tuning().params.gemm_mc, 48);
    }
    EXPECT_EQ(tuning().params.gemm_mc, 96);
  }
  EXPECT_EQ(tuning().params, before);
}

// The device GEMM's named configuration is read from the environment once, when the context is
// loaded (not on every call), and a test or sweep forces it with ScopedTuning, the parameters
// in force kept.
TEST(Tuning, DeviceGemmConfigIsReadOnceAndForcedInScope) {
  {
    EnvGuard e("SOL_SM90_GEMM_CONFIG", "64x128:s4");
    reload_tuning();
    EXPECT_EQ(tuning().device.sm90_gemm_config, "64x128:s4");
    EnvGuard later("SOL_SM90_GEMM_CONFIG", "128x256");
    EXPECT_EQ(tuning().device.sm90_gemm_config, "64x128:s4");  // not read again
  }
  reload_tuning();
  const Tuning& loaded = tuning();
  EXPECT_EQ(loaded.device.sm90_gemm_config, std::getenv("SOL_SM90_GEMM_CONFIG") ? std::getenv("SOL_SM90_GEMM_CONFIG") : "");
  TuningParams p = loaded.params;
  p.gemm_mc = 96;
  {
    ScopedTuning params(p);
    {
      ScopedTuning device(DeviceTuning{"128x128:s5:k2"});
      EXPECT_EQ(tuning().device.sm90_gemm_config, "128x128:s5:k2");
      EXPECT_EQ(tuning().params.gemm_mc, 96);  // the outer scope's parameters kept
      TuningParams q = p;
      q.gemm_mc = 48;
      ScopedTuning inner(q);
      EXPECT_EQ(tuning().device.sm90_gemm_config, "128x128:s5:k2");  // and the device choice kept
    }
    EXPECT_EQ(tuning().device, loaded.device);
    EXPECT_EQ(tuning().params.gemm_mc, 96);
  }
  EXPECT_EQ(tuning().params, loaded.params);
}

// tune_case picks the fastest candidate only when it beats the default by the margin, and
// times each under its own forced value.
TEST(Tuning, TuneCaseKeepsTheDefaultUnlessBeaten) {
  TuningParams base = default_tuning_params(core_shape());
  base.gemm_mc = 240;
  auto spin = [] {
    // Work proportional to gemm_mc: a candidate's time tells which value was in force.
    volatile double x = 0;
    for (int64_t i = 0; i < tuning().params.gemm_mc * 2000; ++i) x = x + 1;
  };
  const TuneOutcome o = tune_case({"gemm_mc", {48, 96, 3072}, "spin", spin}, base, 3);
  EXPECT_EQ(o.value, 48);
  EXPECT_GT(o.speedup, 1.5);
  EXPECT_EQ(o.default_value, base.gemm_mc);
  ASSERT_EQ(o.medians.size(), 4u);  // the default joins the candidates
  EXPECT_LT(o.medians.front().second, o.medians.back().second);
  // A margin no candidate can beat keeps the default.
  const TuneOutcome kept = tune_case({"gemm_mc", {48}, "spin", spin}, base, 3, 1e9);
  EXPECT_EQ(kept.value, base.gemm_mc);
  EXPECT_DOUBLE_EQ(kept.speedup, 1.0);
  EXPECT_THROW(tune_case({"gemm_mr", {1}, "x", spin}, base, 3), Error);
}

}  // namespace
}  // namespace sol
