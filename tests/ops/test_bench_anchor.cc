// An op's anchor on its own row (BenchRecord::anchor): timed beside the op by `sol bench`, held to
// the op's floor, in the table's anchor columns and the record's JSON, and a record that carries
// one still read by `sol model loop` and `sol model calibrate`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

#include "hw/flat_profile.h"
#include "sol/bench.h"
#include "sol/error.h"
#include "sol/model.h"
#include "sol/model_loop.h"
#include "sol/registry.h"

namespace sol {
namespace {

// A copy, whose anchor copies the same bytes; each counts its runs and the sets they used.
class CopyWithAnchor : public OpCase {
 public:
  explicit CopyWithAnchor(bool with_anchor) : with_anchor_(with_anchor), src_(1 << 16, 1), dst_(1 << 16) {}
  std::string shape() const override { return "n=65536"; }
  std::string dtype() const override { return "u8"; }
  Cost cost() const override {
    Cost c;
    c.bytes = 2.0 * double(src_.size());
    c.memory = Unit::mem_copy;
    return c;
  }
  void run(int) override {
    std::memcpy(dst_.data(), src_.data(), src_.size());
    ++runs;
  }
  std::string anchor() const override { return with_anchor_ ? "memcpy (the test's anchor)" : ""; }
  void run_anchor(int set) override {
    if (!with_anchor_) return OpCase::run_anchor(set);
    std::memmove(dst_.data(), src_.data(), src_.size());
    ++anchor_runs;
  }
  CheckResult check() override { return {true, 0, 0, ""}; }
  int runs = 0, anchor_runs = 0;

 private:
  bool with_anchor_;
  std::vector<char> src_, dst_;
};

OpInfo fake_op() {
  OpInfo op;
  op.name = "copy-anchored";
  op.summary = "test";
  return op;
}

// Benchmarks the case (kept by the caller, which reads its counts) from round ceilings.
BenchRecord bench_fake(std::unique_ptr<OpCase>& c) {
  const OpInfo op = fake_op();
  PreparedCase p{std::move(c), false, OpParams("copy-anchored", {})};
  BenchOptions o;
  o.threads = 1;
  o.pair_ceiling = false;
  o.in_cache = false;
  o.timing.min_seconds = 0.005;
  o.timing.min_runs = 3;
  o.timing.warmup_seconds = 0.001;
  const MachineProfile m = testing_hw::flat_profile(50e9, 100e9);
  BenchRecord r = bench_prepared(op, p, m, o);
  c = std::move(p.c);
  return r;
}

TEST(BenchAnchor, TimedBesideTheOpAndHeldToItsFloor) {
  std::unique_ptr<OpCase> owner = std::make_unique<CopyWithAnchor>(true);
  auto* c = static_cast<CopyWithAnchor*>(owner.get());
  const BenchRecord r = bench_fake(owner);
  ASSERT_TRUE(r.anchor.has_value());
  EXPECT_EQ(r.anchor->name, "memcpy (the test's anchor)");
  EXPECT_GE(r.anchor->timing.runs, 3);
  EXPECT_GE(c->anchor_runs, r.anchor->timing.runs) << "the anchor's own runs were timed";
  ASSERT_GT(r.anchor->timing.median_s, 0);
  EXPECT_NEAR(r.anchor->sol_pct, 100.0 * r.floor.floor_s / r.anchor->timing.median_s, 1e-9 * r.anchor->sol_pct);
  EXPECT_NEAR(r.sol_pct, 100.0 * r.floor.floor_s / r.timing.median_s, 1e-9 * r.sol_pct) << "Sol's own SOL% unchanged";
  EXPECT_DOUBLE_EQ(anchor_speedup(r), r.anchor->timing.median_s / r.timing.median_s);
}

TEST(BenchAnchor, ACaseWithoutOneHasNoneAndCannotRunOne) {
  std::unique_ptr<OpCase> owner = std::make_unique<CopyWithAnchor>(false);
  auto* c = static_cast<CopyWithAnchor*>(owner.get());
  const BenchRecord r = bench_fake(owner);
  EXPECT_FALSE(r.anchor.has_value());
  EXPECT_EQ(c->anchor_runs, 0);
  EXPECT_TRUE(std::isnan(anchor_speedup(r)));
  EXPECT_THROW(c->run_anchor(0), Error);
}

BenchRecord record_with(double sol_s, std::optional<double> anchor_s) {
  BenchRecord r;
  r.op = "gemm";
  r.shape = "m=4096,n=7168,k=2048,nt";
  r.dtype = "f8e4m3->bf16";
  r.isa = "cuda:0 sm_90a";
  r.timing.median_s = r.timing.min_s = r.timing.max_s = sol_s;
  r.timing.runs = 21;
  r.cost.flops = 2.0 * 4096 * 7168 * 2048;
  r.cost.bytes = 4096.0 * 2048 + 7168.0 * 2048 + 2 * 4096.0 * 7168;
  r.cost.compute = Unit::mma_fp8;
  r.cost.memory = Unit::mem_read;
  r.floor.floor_s = 1e-4;
  r.floor.bound = Bound::compute;
  r.sol_pct = 100 * r.floor.floor_s / sol_s;
  r.ceiling_unit = Unit::mma_fp8;
  if (anchor_s) {
    BenchRecord::Anchor a;
    a.name = "cuBLASLt 13.1.0 fp8 block 1x128/128x128";
    a.timing.median_s = a.timing.min_s = a.timing.max_s = *anchor_s;
    a.timing.runs = 21;
    a.sol_pct = 100 * r.floor.floor_s / *anchor_s;
    r.anchor = a;
  }
  return r;
}

TEST(BenchAnchor, JsonCarriesItAsOneObjectOnlyWhenPresent) {
  const nlohmann::json with = nlohmann::json::parse(bench_record_json(record_with(2e-4, 3e-4)));
  ASSERT_TRUE(with.contains("anchor"));
  const nlohmann::json& a = with["anchor"];
  EXPECT_EQ(a["name"], "cuBLASLt 13.1.0 fp8 block 1x128/128x128");
  EXPECT_DOUBLE_EQ(a["time_s"].get<double>(), 3e-4);
  EXPECT_EQ(a["runs"], 21);
  EXPECT_NEAR(a["sol_pct"].get<double>(), 100.0 / 3, 1e-9);
  EXPECT_NEAR(a["sol_speedup"].get<double>(), 1.5, 1e-12);
  EXPECT_DOUBLE_EQ(with["time_s"].get<double>(), 2e-4) << "time_s stays Sol's";
  EXPECT_EQ(with["compute_unit"], "mma_fp8");
  const nlohmann::json without = nlohmann::json::parse(bench_record_json(record_with(2e-4, std::nullopt)));
  EXPECT_FALSE(without.contains("anchor"));
}

TEST(BenchAnchor, TableCellsAndLegend) {
  const BenchRecord with = record_with(2e-4, 5e-4), without = record_with(2e-4, std::nullopt);
  const std::string header = anchor_table_header(), cells = anchor_table_cells(with), dashes = anchor_table_cells(without);
  EXPECT_EQ(cells.size(), header.size()) << "fixed width: '" << header << "' '" << cells << "'";
  EXPECT_EQ(dashes.size(), header.size());
  EXPECT_NE(header.find("anchor"), std::string::npos);
  EXPECT_NE(header.find("Sol/anc"), std::string::npos);
  EXPECT_NE(cells.find("0.500ms"), std::string::npos) << cells;
  EXPECT_NE(cells.find(" 20.0"), std::string::npos) << cells;  // 1e-4 / 5e-4
  EXPECT_NE(cells.find("2.50x"), std::string::npos) << cells;
  EXPECT_EQ(dashes.find_first_not_of(" -"), std::string::npos) << dashes;
  const std::string legend = anchor_table_legend({with, without, with});
  EXPECT_NE(legend.find("anchor of gemm f8e4m3->bf16: cuBLASLt 13.1.0 fp8 block 1x128/128x128\n"), std::string::npos)
      << legend;
  EXPECT_EQ(legend.find("cuBLASLt"), legend.rfind("cuBLASLt")) << "each anchor named once: " << legend;
  EXPECT_EQ(anchor_table_legend({without}), "");
}

TEST(BenchAnchor, AnOpWithoutWorkHasNoAnchorPercentEither) {
  BenchRecord r = record_with(2e-4, 3e-4);
  r.anchor->sol_pct = std::nan("");
  const std::string cells = anchor_table_cells(r);
  EXPECT_EQ(cells.find("nan"), std::string::npos) << cells;
  EXPECT_NE(cells.find("0.300ms"), std::string::npos) << cells;
}

// `sol model loop` and `sol model calibrate` read Sol's time from a record that also carries an
// anchor, and a device record's fp8 unit.
TEST(BenchAnchor, ModelReadersReadARecordWithAnAnchor) {
  const std::string path = ::testing::TempDir() + "anchor_records_" + std::to_string(::getpid()) + ".json";
  BenchRecord r = record_with(2e-4, 3e-4);
  r.threads = 1;
  {
    std::ofstream out(path);
    out << "[" << bench_record_json(r) << "]\n";
  }
  MachineProfile machine = testing_hw::flat_profile(50e9, 100e9);
  std::vector<LoopRecord> ops;
  read_loop_records(path, machine, ops);
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_DOUBLE_EQ(ops[0].measured_s, 2e-4);
  EXPECT_EQ(ops[0].compute, Unit::mma_fp8);
  const std::vector<KernelSample> samples = read_kernel_samples(path);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_DOUBLE_EQ(samples[0].time_s, 2e-4);
  EXPECT_DOUBLE_EQ(samples[0].floor_s, 1e-4);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sol
