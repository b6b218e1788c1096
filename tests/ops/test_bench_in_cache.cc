// The in-cache run `sol bench` adds beside a memory-bound op (BenchRecord::in_cache_*): which
// rows it keeps, that it is held to the floor of the shape it ran, and when it is left out.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "hw/flat_profile.h"
#include "sol/bench.h"
#include "sol/error.h"
#include "sol/registry.h"

namespace sol {
namespace {

// Round ceilings (every unit 50 G/s on one thread, 100 G/s on all): no test measures this machine.
MachineProfile round_profile() { return testing_hw::flat_profile(50e9, 100e9); }

// bench_case without the automatic cold rotation (sets filling 8x the LLC): these cases are
// small, and what is tested is the record, not the timing.
BenchRecord bench_quick(const OpInfo& op, const OpParams& params, const MachineProfile& m, const BenchOptions& opt) {
  PreparedCase p{op.make(params, 0), false, params};
  return bench_prepared(op, p, m, opt);
}

BenchOptions quick_options() {
  BenchOptions o;
  o.threads = 1;
  o.pair_ceiling = false;  // the floors come from round_profile()
  o.timing.min_seconds = 0.01;
  o.timing.min_runs = 3;
  o.timing.warmup_seconds = 0.001;
  return o;
}

TEST(BenchInCache, RowsAreCutToHalfOfL2PerThread) {
  const long l2 = 1 << 20;
  // Already within half of L2: the case keeps its rows (it then runs hot rather than cold).
  EXPECT_EQ(in_cache_rows(16, 458752, 1, l2), 16);
  EXPECT_EQ(in_cache_rows(16, 2 * 458752, 2, l2), 16);
  // 4096 rows of 28 KiB (a norm's 7168 bf16 in and out): 18 rows fit in 512 KiB, 19 do not.
  const double bytes = 4096.0 * 28672;
  EXPECT_EQ(in_cache_rows(4096, bytes, 1, l2), 18);
  EXPECT_EQ(in_cache_rows(4096, bytes, 2, l2), 36);  // half of each thread's L2
  // Rows larger than the budget: one row per thread, never more rows than the case has.
  EXPECT_EQ(in_cache_rows(4096, 1e12, 2, l2), 2);
  EXPECT_EQ(in_cache_rows(1, 1e12, 4, l2), 1);
  EXPECT_EQ(in_cache_rows(0, 0, 1, l2), 0);
}

TEST(BenchInCache, NonsenseArgumentsAreErrors) {
  EXPECT_THROW(in_cache_rows(-1, 100, 1, 1 << 20), Error);
  EXPECT_THROW(in_cache_rows(16, -1, 1, 1 << 20), Error);
  EXPECT_THROW(in_cache_rows(16, 100, 0, 1 << 20), Error);
  EXPECT_THROW(in_cache_rows(16, 100, 1, 0), Error);
}

// The record names the smaller shape it ran and its SOL% is against that shape's own floor,
// not the full case's (which would inflate it by the ratio of the two shapes' bytes).
TEST(BenchInCache, MemoryBoundOpRunsSmallerAndIsHeldToItsOwnFloor) {
  const OpInfo& op = find_op("rmsnorm");
  const MachineProfile m = round_profile();
  const OpParams params = resolve_params(op, {{"tokens", "2048"}, {"hidden", "1024"}});
  const BenchRecord r = bench_quick(op, params, m, quick_options());
  ASSERT_EQ(r.floor.bound, Bound::memory);
  EXPECT_EQ(r.ceiling_moved, 1.0);  // nothing paired, nothing moved
  ASSERT_GT(r.in_cache_s, 0);
  const int64_t rows = in_cache_rows(2048, r.cost.bytes, 1, std::max(cpu_features().l2_bytes, 256L << 10));
  ASSERT_LT(rows, 2048);
  EXPECT_EQ(r.in_cache_shape, "tokens=" + std::to_string(rows) + " hidden=1024");
  OpParams small = params;
  small.set("tokens", std::to_string(rows));
  const Floor f = roofline_floor(op.make(small, 0)->cost(), m, 1);
  EXPECT_NEAR(r.in_cache_sol_pct, 100.0 * f.floor_s / r.in_cache_s, 1e-9 * r.in_cache_sol_pct);
  // The full case's floor is ~2048 / rows times larger (8x with a 2 MiB L2, 16x with 1 MiB):
  // using it would be far off.
  ASSERT_LE(rows, 2048 / 4);
  EXPECT_LT(f.floor_s, 1.5 * r.floor.floor_s * double(rows) / 2048);
}

// A real op whose cost the test chooses: y = x * a + b repeated `fmas` times per element, over
// `rows` rows of 256 floats, plus `fixed_bytes` written whatever the rows (as padding rows are).
// With fmas = 100 and the round profile, its floor is compute-bound.
class ArithmeticRows : public OpCase {
 public:
  ArithmeticRows(int64_t rows, int fmas, double fixed_bytes = 0)
      : x_(size_t(rows) * 256, 1.0f), y_(x_.size()), fmas_(fmas), fixed_bytes_(fixed_bytes) {}
  std::string shape() const override { return "rows=" + std::to_string(x_.size() / 256); }
  std::string dtype() const override { return "f32"; }
  Cost cost() const override {
    const double n = double(x_.size());
    return {2.0 * fmas_ * n, 8 * n + fixed_bytes_, Unit::fma_f32, Unit::mem_copy, 4 * n};
  }
  void run(int) override {
    for (size_t i = 0; i < x_.size(); ++i) {
      float v = x_[i];
      for (int k = 0; k < fmas_; ++k) v = v * 0.999f + 0.001f;
      y_[i] = v;
    }
  }
  CheckResult check() override { return {true, 0, 0, ""}; }

 private:
  std::vector<float> x_, y_;
  int fmas_;
  double fixed_bytes_;
};

OpInfo arithmetic_rows_op(int fmas, double fixed_bytes = 0) {
  OpInfo op;
  op.name = "arithmetic-rows";
  op.params = {{"rows", "rows of 256 floats", "4096", ParamSpec::size}};
  op.rows_param = "rows";
  op.make = [fmas, fixed_bytes](const OpParams& p, int64_t) -> std::unique_ptr<OpCase> {
    return std::make_unique<ArithmeticRows>(p.integer("rows"), fmas, fixed_bytes);
  };
  return op;
}

TEST(BenchInCache, OnlyMemoryBoundFloorsGetTheFigure) {
  const MachineProfile m = round_profile();
  for (int fmas : {0, 100}) {
    const OpInfo op = arithmetic_rows_op(fmas);
    const OpParams params("arithmetic-rows", {{"rows", "4096"}});  // 8 MiB moved: cut to fit in L2
    const BenchRecord r = bench_quick(op, params, m, quick_options());
    if (fmas == 0) {
      ASSERT_EQ(r.floor.bound, Bound::memory);
      EXPECT_GT(r.in_cache_s, 0);
      EXPECT_NE(r.in_cache_shape, "rows=4096");
    } else {
      ASSERT_EQ(r.floor.bound, Bound::compute);
      EXPECT_EQ(r.in_cache_s, 0);
      EXPECT_TRUE(r.in_cache_shape.empty());
    }
  }
}

// An op with bytes that do not shrink with its rows (MoE permute's padding rows): the small
// case would still stream from DRAM, and its time is no in-cache time.
TEST(BenchInCache, LeftOutWhenTheSmallCaseStillOutgrowsL2) {
  const MachineProfile m = round_profile();
  const OpParams params("arithmetic-rows", {{"rows", "4096"}});
  BenchRecord r = bench_quick(arithmetic_rows_op(0, 64e6), params, m, quick_options());
  ASSERT_EQ(r.floor.bound, Bound::memory);
  EXPECT_EQ(r.in_cache_s, 0);
  // The same op with a fixed part that fits: measured.
  r = bench_quick(arithmetic_rows_op(0, 64e3), params, m, quick_options());
  EXPECT_GT(r.in_cache_s, 0);
}

TEST(BenchInCache, LeftOutWhenOffComputeBoundOrWithoutRows) {
  const MachineProfile m = round_profile();
  BenchOptions off = quick_options();
  off.in_cache = false;
  const OpInfo& norm = find_op("rmsnorm");
  BenchRecord r = bench_quick(norm, resolve_params(norm, {{"tokens", "64"}, {"hidden", "1024"}}), m, off);
  EXPECT_EQ(r.in_cache_s, 0);
  EXPECT_TRUE(r.in_cache_shape.empty());
  // A GEMM held to its compute floor: a smaller one would say nothing about its memory.
  const OpInfo& gemm = find_op("gemm");
  r = bench_quick(gemm, resolve_params(gemm, {{"m", "128"}, {"n", "128"}, {"k", "512"}}), m, quick_options());
  ASSERT_EQ(r.floor.bound, Bound::compute);
  EXPECT_EQ(r.in_cache_s, 0);
  // A gather from a table larger than the cache has no rows parameter: its reads would not shrink.
  const OpInfo& embedding = find_op("embedding");
  EXPECT_TRUE(embedding.rows_param.empty());
  r = bench_quick(embedding, resolve_params(embedding, {{"tokens", "64"}, {"vocab", "1024"}, {"hidden", "256"}}), m,
                 quick_options());
  EXPECT_EQ(r.in_cache_s, 0);
}

// Every memory-bound layer op of issue 5 whose bytes scale with its rows gets the figure.
TEST(BenchInCache, LayerOpsNameTheirRows) {
  const std::set<std::string> with_rows = {"rmsnorm", "layernorm", "quant-fp8", "rope", "silu-mul", "gelu",
                                           "softmax", "moe-routing", "moe-permute", "sampling", "copy", "cast"};
  for (const std::string& name : with_rows) {
    const OpInfo& op = find_op(name);
    EXPECT_FALSE(op.rows_param.empty()) << name;
  }
}

TEST(BenchInCache, RegisterRejectsARowsParameterTheOpLacks) {
  OpInfo bad;
  bad.name = "in-cache-test-op";
  bad.params = {{"n", "elements", "16", ParamSpec::size}};
  bad.rows_param = "tokens";
  bad.make = [](const OpParams&, int64_t) -> std::unique_ptr<OpCase> { return nullptr; };
  try {
    register_op(bad);
    FAIL() << "registered an op whose rows_param is not a parameter";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rows_param 'tokens'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(find_op("in-cache-test-op"), Error);  // nothing was registered
}

}  // namespace
}  // namespace sol
