#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hw/flat_profile.h"
#include "sol/error.h"
#include "sol/model.h"
#include "sol/model_loop.h"

namespace sol {
namespace {

// Every ceiling at 10 G/s on one thread: a floor is bytes / 1e10 or flops / 1e10.
MachineProfile tiny_machine() { return testing_hw::flat_profile(10e9, 20e9); }

LoopRecord copy_op(double bytes, double seconds) {
  LoopRecord m;
  m.op = "copy";
  m.shape = "n=" + std::to_string(bytes);
  m.dtype = "f32";
  m.bytes = bytes;
  m.memory = Unit::mem_copy;
  m.measured_s = seconds;
  return m;
}

// A memory-bound row op with its in-cache run: floor `floor_s` (bytes at 10 GB/s), measured
// in `seconds`, its in-cache SOL% `in_cache_pct` (in-cache time scaled: floor * 100 / pct).
LoopRecord row_op(const std::string& op, double floor_s, double seconds, double in_cache_pct) {
  LoopRecord m = copy_op(floor_s * 1e10, seconds);
  m.op = op;
  m.dtype = "bf16";
  m.bound = "memory";
  m.in_cache_s = floor_s * 100 / in_cache_pct;
  return m;
}

LoopRecord gemm_op(const std::string& shape, const std::string& dtype, double flops, double seconds,
                   Unit unit = Unit::amx_bf16) {
  LoopRecord m;
  m.op = "gemm";
  m.shape = shape;
  m.dtype = dtype;
  m.flops = flops;
  m.compute = unit;
  m.bound = "compute";
  m.measured_s = seconds;
  return m;
}

TEST(ModelLoop, LeaveOneOutPrediction) {
  // Floors: 1 ms, 2 ms, 4 ms at 10 GB/s; efficiencies 50%, 50%, 80%.
  std::vector<LoopRecord> ops = {copy_op(1e7, 2e-3), copy_op(2e7, 4e-3), copy_op(4e7, 5e-3)};
  auto p = predict_loop(tiny_machine(), ops);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_NEAR(p[0].floor_s, 1e-3, 1e-12);
  EXPECT_EQ(p[0].peers, 2);
  EXPECT_NEAR(p[0].efficiency, 0.65, 1e-12);  // median of 0.5 and 0.8
  EXPECT_NEAR(p[2].efficiency, 0.5, 1e-12);
  EXPECT_NEAR(p[2].predicted_s, 8e-3, 1e-12);
  EXPECT_NEAR(p[2].error_pct, 60.0, 1e-9);
  // An op's own time never enters its own prediction.
  ops[2].measured_s = 100.0;
  EXPECT_NEAR(predict_loop(tiny_machine(), ops)[2].predicted_s, 8e-3, 1e-12);
}

// A memory-bound op is the slower of its bytes at the memory-limited ops' efficiency (those
// measured at 1.2x their in-cache time or more) of its size regime and its own in-cache time.
TEST(ModelLoop, MemoryBoundOpsFromDramPeersAndTheirOwnInCacheTime) {
  std::vector<LoopRecord> ops = {
      row_op("rmsnorm", 1e-3, 1.25e-3, 150),  // 0: efficiency 0.8, memory-limited
      row_op("rope", 2e-3, 2e-3 / 0.7, 120),  // 1: efficiency 0.7, memory-limited
      row_op("gelu", 1.5e-3, 3e-3, 55),       // 2: in-cache time 1.5 / 0.55 = 2.727 ms
      row_op("rmsnorm", 10e-6, 20e-6, 150),   // 3: 16 rows, efficiency 0.5
      row_op("layernorm", 12e-6, 20e-6, 120), // 4: 16 rows, efficiency 0.6
  };
  auto p = predict_loop(tiny_machine(), ops);
  // 0: its regime's memory-limited peer is rope (2 ms is within 4x of 1 ms; gelu's 3 ms is less
  // than 1.2x its in-cache 2.727 ms; the 16-row ops are 100x smaller): 1 ms / 0.7 = 1.4286 ms,
  // slower than its in-cache 1 / 1.5 = 0.667 ms. Error (1.4286 - 1.25) / 1.25 = +14.29%.
  EXPECT_EQ(p[0].regime, "dram size");
  EXPECT_EQ(p[0].peers, 1);
  EXPECT_TRUE(p[0].single_peer);
  EXPECT_FALSE(p[0].in_cache_bound);
  EXPECT_NEAR(p[0].predicted_s, 1e-3 / 0.7, 1e-12);
  EXPECT_NEAR(p[0].error_pct, 100 * (1e-3 / 0.7 - 1.25e-3) / 1.25e-3, 1e-9);
  // 2: peers rmsnorm (0.8) and rope (0.7), median 0.75: 2 ms from memory, but its code takes
  // 2.727 ms in cache: that is the prediction, -9.09% against 3 ms.
  EXPECT_EQ(p[2].peers, 2);
  EXPECT_NEAR(p[2].peer_efficiency, 0.75, 1e-12);
  EXPECT_TRUE(p[2].in_cache_bound);
  EXPECT_NEAR(p[2].predicted_s, 1.5e-3 / 0.55, 1e-12);
  EXPECT_NEAR(p[2].efficiency, 0.55, 1e-12);
  EXPECT_NEAR(p[2].error_pct, 100 * (1.5e-3 / 0.55 - 3e-3) / 3e-3, 1e-9);
  // 3: the 16-row regime holds layernorm only: 10 us / 0.6 = 16.667 us, -16.67%.
  EXPECT_EQ(p[3].regime, "dram size");
  EXPECT_NEAR(p[3].predicted_s, 10e-6 / 0.6, 1e-15);
  EXPECT_NEAR(p[3].error_pct, 100 * (10e-6 / 0.6 - 20e-6) / 20e-6, 1e-9);
  // Without a memory-limited op of its size, any size: 4 alone among 16-row ops once 3 is gone.
  ops.erase(ops.begin() + 3);
  auto q = predict_loop(tiny_machine(), ops);
  EXPECT_EQ(q[3].regime, "dram");
  EXPECT_EQ(q[3].peers, 2);  // rmsnorm 0.8 and rope 0.7
  EXPECT_NEAR(q[3].predicted_s, 12e-6 / 0.75, 1e-15);
}

// Memory-limited is relative to the op's own code: 2 ms against 1.11 ms in cache is (in-cache
// SOL% 90, below 100), 1.8 ms against 1.67 ms is not.
TEST(ModelLoop, MemoryLimitedMeansWellAboveItsOwnInCacheTime) {
  std::vector<LoopRecord> ops = {
      row_op("softmax", 1e-3, 2e-3, 90),     // efficiency 0.5, in cache 1.11 ms: limited
      row_op("rmsnorm", 1e-3, 1.25e-3, 150), // efficiency 0.8, in cache 0.67 ms: limited
      row_op("gelu", 1e-3, 1.8e-3, 60),      // in cache 1.67 ms, 1.8 < 1.2 * 1.67: not limited
      row_op("rope", 1.5e-3, 2e-3, 200),
  };
  auto p = predict_loop(tiny_machine(), ops);
  EXPECT_EQ(p[3].peers, 2);
  EXPECT_NEAR(p[3].peer_efficiency, 0.65, 1e-12);  // softmax and rmsnorm; with gelu 0.556
  EXPECT_NEAR(p[3].predicted_s, 1.5e-3 / 0.65, 1e-12);
}

// A compute-bound GEMM learns from GEMMs of its unit and work class (dtype and shape class:
// decode <= 128 rows, mid, large >= 2048), then its unit, then any GEMM; an op no other record
// shares borrows from the compute-bound ops of its unit, and says so.
TEST(ModelLoop, ComputeBoundOpsFromTheirUnitAndShapeClass) {
  std::vector<LoopRecord> ops = {
      gemm_op("m=4096,n=2112,k=7168", "bf16", 1e8, 1e-2 / 0.6),  // 0: floor 10 ms, large
      gemm_op("m=2048,n=2048,k=2048", "bf16", 2e8, 2e-2 / 0.5),  // 1: floor 20 ms, large
      gemm_op("m=512,n=512,k=512", "bf16", 1e7, 1e-3 / 0.3),     // 2: floor 1 ms, mid
      gemm_op("m=1024,n=1024,k=1024", "f32", 1e8, 1e-2 / 0.9, Unit::fma_f32),
  };
  LoopRecord attn = gemm_op("sq=512", "bf16", 3e7, 3e-3 / 0.4);
  attn.op = "attention";
  ops.push_back(attn);
  auto p = predict_loop(tiny_machine(), ops);
  EXPECT_EQ(p[0].regime, "class");
  EXPECT_TRUE(p[0].single_peer);
  EXPECT_NEAR(p[0].predicted_s, 1e-2 / 0.5, 1e-12);  // from the 2048^3 GEMM, not the mid one
  EXPECT_EQ(p[2].regime, "unit");  // no other mid bf16 GEMM: both large ones, median 0.55
  EXPECT_NEAR(p[2].predicted_s, 1e-3 / 0.55, 1e-12);
  EXPECT_EQ(p[3].regime, "op");  // the only f32 GEMM: the bf16 ones, median 0.5
  EXPECT_NEAR(p[3].predicted_s, 1e-2 / 0.5, 1e-12);
  EXPECT_EQ(p[4].regime, "unit, other ops");  // the amx_bf16 GEMMs: 0.6, 0.5, 0.3
  EXPECT_NEAR(p[4].predicted_s, 3e-3 / 0.5, 1e-12);
}

// Peers come from the op's size regime (floors within 4x): a small copy is predicted from the
// small one beside it, flagged as a single peer, not from the large ones; a sample whose median
// run took 1.5x its fastest was cut by the scheduler and is neither predicted nor a peer.
TEST(ModelLoop, PeersFromTheSameSizeRegimeAndScheduledOutSamplesDropped) {
  std::vector<LoopRecord> ops = {copy_op(1e7, 2e-3), copy_op(1.5e7, 3e-3), copy_op(1e9, 0.11),
                                 copy_op(1.2e9, 0.13), copy_op(1.1e9, 0.5)};
  for (auto& m : ops) m.min_s = m.measured_s;
  ops[4].min_s = 0.2;  // median 2.5x the fastest run
  auto p = predict_loop(tiny_machine(), ops);
  EXPECT_EQ(p[0].regime, "size");
  EXPECT_EQ(p[0].peers, 1);
  EXPECT_TRUE(p[0].single_peer);
  EXPECT_NEAR(p[0].efficiency, 0.5, 1e-12);
  EXPECT_NEAR(p[2].efficiency, 120.0 / 130, 1e-12);  // only the other large copy: 4 was dropped
  EXPECT_FALSE(p[4].dropped.empty());
  EXPECT_EQ(p[4].peers, 0);
  // A paired ceiling that moved past 1.2x drops the sample too.
  ops[3].ceiling_moved = 1.3;
  auto moved = predict_loop(tiny_machine(), ops);
  EXPECT_NE(moved[3].dropped.find("ceiling moved"), std::string::npos);
  EXPECT_EQ(moved[2].regime, "bound");  // no large copy left: the small ones
  EXPECT_EQ(moved[2].peers, 2);
  // Without a peer in its regime an op borrows from its op at any size.
  std::vector<LoopRecord> two = {copy_op(1e7, 2e-3), copy_op(1e9, 0.2)};
  auto q = predict_loop(tiny_machine(), two);
  EXPECT_EQ(q[0].regime, "bound");
  EXPECT_NEAR(q[0].efficiency, 0.5, 1e-12);
}

// The same case measured again (another run of the same op, shape and dtype) is the op's own
// time, not a peer's: it is never used.
TEST(ModelLoop, TheSameCaseMeasuredAgainIsNoPeer) {
  std::vector<LoopRecord> ops = {copy_op(1e7, 2e-3), copy_op(1e7, 1.1e-3), copy_op(2e7, 4e-3)};
  auto p = predict_loop(tiny_machine(), ops);
  EXPECT_EQ(p[0].peers, 1);
  EXPECT_NEAR(p[0].predicted_s, 2e-3, 1e-12);  // from the 2e7 copy at 50%, not its repeat at 91%
  EXPECT_EQ(p[2].peers, 2);                    // both runs of the other case are its peers
}

TEST(ModelLoop, OpsWithoutPeersAreNotPredicted) {
  std::vector<LoopRecord> ops = {copy_op(1e7, 2e-3)};
  ops.push_back(copy_op(1e7, 2e-3));
  ops[1].threads = 2;
  for (const auto& p : predict_loop(tiny_machine(), ops)) EXPECT_EQ(p.peers, 0);
  // An op with no work (floor 0) is dropped, and lends no efficiency of 0 to the others.
  std::vector<LoopRecord> empty = {copy_op(1e7, 2e-3), copy_op(0, 1e-6), copy_op(2e7, 4e-3)};
  auto q = predict_loop(tiny_machine(), empty);
  EXPECT_NE(q[1].dropped.find("no work"), std::string::npos);
  EXPECT_EQ(q[0].peers, 1);
  EXPECT_NEAR(q[0].predicted_s, 2e-3, 1e-12);
}

// ---- through report.json, as `sol model loop` reads it ----

nlohmann::json record(const std::string& op, const std::string& shape, double bytes, double time_s,
                      double in_cache_pct) {
  const double floor_s = bytes / 1e10;
  return {{"op", op}, {"shape", shape}, {"dtype", "bf16"}, {"threads", 1}, {"flops", 0.0},
          {"bytes", bytes}, {"read_bytes", bytes / 2}, {"compute_unit", "fma_f32"},
          {"memory_unit", "mem_copy"}, {"bound", "memory"}, {"floor_s", floor_s},
          {"time_s", time_s}, {"min_s", time_s * 0.95}, {"max_s", time_s * 1.2},
          {"sol_pct", 100 * floor_s / time_s}, {"sol_pct_cached", 100 * floor_s / time_s},
          {"gbps", bytes / time_s / 1e9}, {"tflops", 0.0}, {"ceiling_moved", 1.05},
          {"in_cache_sol_pct", in_cache_pct}};
}

std::string write_report(const nlohmann::json& records, const std::string& name) {
  std::string path = testing::TempDir() + name;
  nlohmann::json doc = {{"machine", nlohmann::json::parse(tiny_machine().to_json())}, {"records", records}};
  std::ofstream(path) << doc.dump();
  return path;
}

std::vector<PredictedOp> predict_file(const std::string& path) {
  MachineProfile m;
  std::vector<LoopRecord> ops;
  read_loop_records(path, m, ops);
  return predict_loop(m, ops);
}

TEST(ModelLoop, ReportRecordsCarryTheirInCacheTime) {
  nlohmann::json records = nlohmann::json::array(
      {record("rmsnorm", "tokens=4096", 1e8, 12.5e-3, 150), record("gelu", "tokens=4096", 1.5e8, 30e-3, 50),
       record("rope", "tokens=4096", 1.2e8, 15e-3, 0)});
  std::string path = write_report(records, "sol_loop_in_cache.json");
  MachineProfile m;
  std::vector<LoopRecord> ops;
  read_loop_records(path, m, ops);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_NEAR(ops[1].in_cache_s, 15e-3 / 0.5, 1e-15);  // floor_s 15 ms at 50% in cache
  EXPECT_EQ(ops[2].in_cache_s, 0);                      // 0: not measured
  EXPECT_EQ(ops[0].read_bytes, 5e7);
  // Split floor: the copy term 10 ms, the read term 5e7 B at 10 GB/s is 5 ms.
  auto p = predict_loop(m, ops);
  EXPECT_NEAR(p[0].floor_s, 10e-3, 1e-12);
  EXPECT_TRUE(p[1].in_cache_bound);  // 30 ms in cache against 15 / 0.8 from memory
  EXPECT_NEAR(p[1].predicted_s, 30e-3, 1e-12);
  // The bare array `sol bench --json` prints reads the same, floored on the caller's profile.
  std::ofstream(path) << "  " << records.dump(1);
  MachineProfile cached = tiny_machine();
  std::vector<LoopRecord> bare;
  read_loop_records(path, cached, bare);
  ASSERT_EQ(bare.size(), 3u);
  EXPECT_NEAR(predict_loop(cached, bare)[1].predicted_s, 30e-3, 1e-12);
  std::remove(path.c_str());
}

// The honesty of the error column: scaling one record's own timing (and every field derived from
// it) moves no digit of its own prediction, while the predictions that use it as a peer move.
TEST(ModelLoop, ARecordsOwnTimeNeverReachesItsPrediction) {
  nlohmann::json records = nlohmann::json::array({
      record("rmsnorm", "tokens=4096", 1e8, 12.5e-3, 150),
      record("rmsnorm", "tokens=4096 +residual", 2e8, 25e-3, 170),
      record("layernorm", "tokens=4096", 1e8, 11.5e-3, 120),
      record("gelu", "tokens=4096", 1.5e8, 30e-3, 55),
      record("quant", "tokens=4096", 0.9e8, 16e-3, 70),
      record("embedding", "tokens=4096", 1.1e8, 13e-3, 0),
      record("embedding", "tokens=16", 1.1e6, 0.2e-3, 0),
  });
  std::vector<PredictedOp> base = predict_file(write_report(records, "sol_loop_leak.json"));
  for (size_t i = 0; i < records.size(); ++i) {
    nlohmann::json moved = records;
    nlohmann::json& r = moved[i];
    const double k = 1.37;
    for (const char* key : {"time_s", "min_s", "max_s"}) r[key] = r[key].get<double>() * k;
    for (const char* key : {"sol_pct", "sol_pct_cached", "gbps"}) r[key] = r[key].get<double>() / k;
    std::vector<PredictedOp> p = predict_file(write_report(moved, "sol_loop_leak.json"));
    ASSERT_GT(base[i].peers, 0) << i;
    EXPECT_EQ(p[i].predicted_s, base[i].predicted_s) << "record " << i << "'s own time reached its prediction";
    EXPECT_NEAR(p[i].error_pct, 100 * (base[i].predicted_s - k * base[i].measured.measured_s) /
                                    (k * base[i].measured.measured_s), 1e-9);
    // The memory-limited ones (in-cache >= 100%) are everyone's peers: the scaling reaches them.
    bool any_peer_moved = false;
    for (size_t j = 0; j < p.size(); ++j) any_peer_moved |= j != i && p[j].predicted_s != base[j].predicted_s;
    if (i <= 2) {
      EXPECT_TRUE(any_peer_moved) << "record " << i << " is no one's peer: the scaling did not apply";
    }
  }
  std::remove((testing::TempDir() + "sol_loop_leak.json").c_str());
}

TEST(ModelLoop, BadReportsAreNamed) {
  MachineProfile m;
  std::vector<LoopRecord> ops;
  EXPECT_THROW(read_loop_records("/nonexistent/report.json", m, ops), Error);
  auto expect_message = [&](nlohmann::json rec, const std::vector<std::string>& parts) {
    std::string path = write_report(nlohmann::json::array({rec}), "sol_bad_report.json");
    try {
      read_loop_records(path, m, ops);
      ADD_FAILURE() << "no error for " << rec.dump();
    } catch (const Error& e) {
      for (const auto& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
    std::remove(path.c_str());
  };
  expect_message({{"op", "copy"}}, {"records[0]", "'shape'"});
  nlohmann::json r = record("rmsnorm", "tokens=16", 1e6, 1e-4, 150);
  r["read_bytes"] = 2e6;
  expect_message(r, {"records[0]", "read_bytes", "more than bytes"});
  r = record("rmsnorm", "tokens=16", 1e6, 1e-4, 150);
  r["in_cache_sol_pct"] = -3.0;
  expect_message(r, {"records[0]", "in_cache_sol_pct", "-3"});
  r = record("rmsnorm", "tokens=16", 1e6, 1e-4, 150);
  r["time_s"] = 0.0;
  expect_message(r, {"records[0]", "time_s"});
}

}  // namespace
}  // namespace sol
