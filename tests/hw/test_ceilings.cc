// Ceilings measured for real, briefly. The bounds only catch a broken loop or a wrong work
// count (off by 10x or more); they never judge how fast the machine is.
#include <gtest/gtest.h>

#include <string>

#include "sol/error.h"
#include "sol/hw.h"

namespace sol {
namespace {

constexpr double kQuickSeconds = 0.1;

TEST(CeilingUnits, NamesRoundTrip) {
  for (Unit u : kAllUnits) EXPECT_EQ(parse_unit(unit_name(u)), u);
  EXPECT_THROW(parse_unit("fma_f64"), Error);
  EXPECT_EQ(unit_label(Unit::fma_f32), "GFLOP/s");
  EXPECT_EQ(unit_label(Unit::mem_copy), "GB/s");
  EXPECT_EQ(unit_label(Unit::clock), "GHz");
  EXPECT_TRUE(unit_is_memory(Unit::l2_read));
  EXPECT_FALSE(unit_is_memory(Unit::amx_int8));
  EXPECT_DOUBLE_EQ(unit_display_scale(Unit::mem_read), 1e9);
}

// Load on a shared machine (other processes on the core, a descheduled timer) can only make a
// rate look lower, never higher: a figure below `low` is measured again, up to three times,
// before it counts as a broken loop (QuickClockIsPlausible read < 0.5 GHz once at load 13).
void expect_plausible(Unit u, double low, double high) {
  Ceiling c = measure_ceiling(u, 1, kQuickSeconds);
  for (int retry = 0; retry < 3 && c.available && c.one_thread <= low; ++retry)
    c = measure_ceiling(u, 1, kQuickSeconds);
  ASSERT_TRUE(c.available) << unit_name(u) << ": " << c.note;
  EXPECT_EQ(c.unit, u);
  EXPECT_EQ(c.threads, 1);
  EXPECT_EQ(c.one_thread, c.all_threads);
  EXPECT_FALSE(c.note.empty());
  EXPECT_GT(c.one_thread, low) << unit_name(u);
  EXPECT_LT(c.one_thread, high) << unit_name(u);
}

TEST(Ceilings, QuickFmaIsPlausible) { expect_plausible(Unit::fma_f32, 10e9, 1000e9); }
TEST(Ceilings, QuickMemReadIsPlausible) { expect_plausible(Unit::mem_read, 1e9, 500e9); }
TEST(Ceilings, QuickClockIsPlausible) { expect_plausible(Unit::clock, 0.5e9, 7e9); }
TEST(Ceilings, QuickL2ReadIsPlausible) { expect_plausible(Unit::l2_read, 10e9, 5000e9); }
TEST(Ceilings, QuickCopyWriteAndTriadArePlausible) {
  expect_plausible(Unit::mem_copy, 1e9, 1000e9);
  expect_plausible(Unit::mem_write, 1e9, 1000e9);
  expect_plausible(Unit::mem_triad, 1e9, 1000e9);
  expect_plausible(Unit::mem_update, 1e9, 1000e9);
}

// A unit the CPU may lack: measured and plausible where the feature is there, else reported
// unavailable with the missing feature as its note.
void expect_plausible_or_explained(Unit u, bool present, const char* missing, double low, double high) {
  if (!present) {
    Ceiling c = measure_ceiling(u, 1, kQuickSeconds);
    EXPECT_FALSE(c.available);
    EXPECT_EQ(c.note, missing);
    return;
  }
  expect_plausible(u, low, high);
}

TEST(Ceilings, QuickDotBf16IsPlausibleOrExplained) {
  expect_plausible_or_explained(Unit::dot_bf16, cpu_features().avx512_bf16, "no AVX512_BF16", 10e9, 2000e9);
}

TEST(Ceilings, QuickDotS8IsPlausibleOrExplained) {
  expect_plausible_or_explained(Unit::dot_s8, cpu_features().avx512_vnni, "no AVX512_VNNI", 20e9, 4000e9);
}

// fma_f32 and the memory levels are measured on every CPU with AVX2 and FMA, with the widest
// vectors it has, and the notes say which.
TEST(Ceilings, NotesNameTheVectorsUsed) {
  const CpuFeatures& f = cpu_features();
  const bool avx512 = f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  const bool avx2 = f.os_avx && f.avx2 && f.fma;
  if (!avx512 && !avx2) GTEST_SKIP() << "neither AVX-512 nor AVX2 with FMA";
  const Ceiling fma = measure_ceiling(Unit::fma_f32, 1, kQuickSeconds);
  ASSERT_TRUE(fma.available) << fma.note;
  EXPECT_EQ(fma.note.rfind(avx512 ? "vfmadd231ps zmm, " : "vfmadd231ps ymm, ", 0), 0u) << fma.note;
  const Ceiling l2 = measure_ceiling(Unit::l2_read, 1, kQuickSeconds);
  ASSERT_TRUE(l2.available) << l2.note;
  EXPECT_EQ(l2.note.rfind(avx512 ? "AVX-512 loads, " : "AVX2 loads, ", 0), 0u) << l2.note;
}

TEST(Ceilings, AllThreadsRunsEveryCpu) {
  int n = cpu_features().logical_cpus;
  Ceiling c = measure_ceiling(Unit::fma_f32, n, kQuickSeconds);
  ASSERT_TRUE(c.available) << c.note;
  EXPECT_EQ(c.threads, n);
  EXPECT_GT(c.all_threads, 10e9);
  if (n > 1) {
    EXPECT_EQ(c.one_thread, 0) << "only the measured thread count is filled";
  }
}

// Runs the AMX loops where AMX exists (which also checks the tile config survives the
// optimizer, DESIGN §9); elsewhere the ceiling must say why it is missing.
TEST(Ceilings, AmxMeasuredOrExplained) {
  for (Unit u : {Unit::amx_bf16, Unit::amx_int8}) {
    Ceiling c = measure_ceiling(u, 1, kQuickSeconds);
    if (enable_amx()) {
      ASSERT_TRUE(c.available) << c.note;
      EXPECT_GT(c.one_thread, 100e9) << unit_name(u);
      EXPECT_LT(c.one_thread, 100e12) << unit_name(u);
    } else {
      EXPECT_FALSE(c.available);
      EXPECT_EQ(c.one_thread, 0);
      EXPECT_EQ(c.note, "AMX: " + cpu_features().amx_status);
    }
  }
}

TEST(Ceilings, BadArgumentsThrow) {
  EXPECT_THROW(measure_ceiling(Unit::fma_f32, 0, kQuickSeconds), Error);
  EXPECT_THROW(measure_ceiling(Unit::fma_f32, 1, 0), Error);
}

// The full measurement, once: every unit in order, progress before each, thread counts set.
TEST(MachineMeasure, CoversEveryUnitInOrder) {
  std::vector<Unit> announced;
  MachineProfile p = measure_machine([&](Unit u) { announced.push_back(u); });
  ASSERT_EQ(p.ceilings.size(), std::size(kAllUnits));
  ASSERT_EQ(announced.size(), std::size(kAllUnits));
  for (size_t i = 0; i < p.ceilings.size(); ++i) {
    const Ceiling& c = p.ceilings[i];
    EXPECT_EQ(c.unit, kAllUnits[i]);
    EXPECT_EQ(announced[i], kAllUnits[i]);
    EXPECT_EQ(c.threads, cpu_features().logical_cpus);
    if (c.available) {
      EXPECT_GT(c.one_thread, 0) << unit_name(c.unit);
      EXPECT_GT(c.all_threads, 0) << unit_name(c.unit);
    } else {
      EXPECT_FALSE(c.note.empty()) << unit_name(c.unit);
    }
  }
  EXPECT_EQ(p.cpu_model, cpu_features().model_name);
  EXPECT_EQ(p.cores, cpu_features().logical_cpus);
  EXPECT_EQ(p.measured_at.size(), std::string("2024-01-01T00:00:00Z").size());
  EXPECT_GT(p.measure_seconds, 0);
}

}  // namespace
}  // namespace sol
