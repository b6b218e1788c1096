// The fp32 FMA ceiling loops, AVX-512 and AVX2, on their own: every built accumulator count
// returns the FLOPs it issued, and the rate those FLOPs give is one the core can reach (a loop
// counting twice its work would print a ceiling no kernel can approach, and every SOL% under
// it would look half as good).
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <span>
#include <string>

#include "hw/ceiling_loops.h"
#include "hw/parallel_rate.h"
#include "sol/error.h"
#include "sol/hw.h"

namespace sol {
namespace {

struct FmaLoop {
  const char* name;
  bool (*present)();
  double (*fma_f32)(int, long);
  std::span<const int> accumulator_choices;
  int lanes;  // fp32 lanes of one register
};

bool has_avx512_loops() {
  const CpuFeatures& f = cpu_features();
  return f.os_avx512 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
}

bool has_avx2_loops() {
  const CpuFeatures& f = cpu_features();
  return f.os_avx && f.avx2 && f.fma;
}

const FmaLoop kFmaLoops[] = {
    {"avx512", has_avx512_loops, ceiling_loops::fma_f32, ceiling_loops::kAccumulatorChoices, 16},
    {"avx2", has_avx2_loops, ceiling_loops::avx2::fma_f32, ceiling_loops::avx2::kAccumulatorChoices, 8},
};

// Failures name the set, not its bytes.
void PrintTo(const FmaLoop& set, std::ostream* os) { *os << set.name; }

class FmaLoops : public ::testing::TestWithParam<FmaLoop> {
 protected:
  void SetUp() override {
    if (!GetParam().present()) GTEST_SKIP() << "no " << GetParam().name << " loops on this CPU";
  }
};

// Each trip issues every chain kChainRepeats = 4 times (the loops' unroll), one FMA of
// 2 FLOP per lane each.
TEST_P(FmaLoops, ReturnsTheFlopsIssued) {
  const FmaLoop& l = GetParam();
  for (int accumulators : l.accumulator_choices)
    for (long iterations : {0L, 1L, 1000L}) {
      const double expected = double(iterations) * 4 * accumulators * l.lanes * 2;
      EXPECT_EQ(l.fma_f32(accumulators, iterations), expected) << accumulators << " accumulators";
    }
}

TEST_P(FmaLoops, UnbuiltAccumulatorCountIsAnError) {
  EXPECT_THROW(GetParam().fma_f32(7, 1), Error);
  EXPECT_THROW(GetParam().fma_f32(32, 1), Error);
}

// No core with these vectors retires more than two FMAs per register a cycle (Zen 2-5, Haswell
// to Emerald Rapids), so FLOP per cycle is at most 4 x lanes; 20% over it for the clock moving
// between the two measurements. The floor only catches a loop that does not run. A neighbour on
// the sibling vCPU can slow the clock loop (a latency chain) more than the FMA loop, which read
// 98.6 FLOP per cycle against the 76.8 bound once beside a compiler run: a loop counting the
// wrong FLOPs is off in every attempt, noise in one, so each choice gets three.
TEST_P(FmaLoops, RateIsOneTheCoreCanReach) {
  const FmaLoop& l = GetParam();
  const RateOptions o{.threads = 1, .seconds = 0.1, .rep_seconds = 0.005};
  auto clock = [&] { return best_parallel_rate([](int, long it) { return ceiling_loops::clock_cycles(it); }, o); };
  for (int accumulators : l.accumulator_choices) {
    double per_cycle = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
      const double before = clock();
      const double flops = best_parallel_rate([&](int, long it) { return l.fma_f32(accumulators, it); }, o);
      const double hz = std::max(before, clock());
      ASSERT_GT(hz, 0);
      per_cycle = flops / hz;
      if (per_cycle > 0.5 * l.lanes && per_cycle < 1.2 * 4 * l.lanes) break;
    }
    EXPECT_GT(per_cycle, 0.5 * l.lanes) << accumulators << " accumulators";
    EXPECT_LT(per_cycle, 1.2 * 4 * l.lanes) << accumulators << " accumulators";
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, FmaLoops, ::testing::ValuesIn(kFmaLoops),
                         [](const ::testing::TestParamInfo<FmaLoop>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace sol
