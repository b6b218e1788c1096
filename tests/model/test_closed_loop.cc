#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "hw/flat_profile.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol {
namespace {

MachineProfile tiny_machine() { return testing_hw::flat_profile(10e9, 20e9); }

MeasuredOp copy_op(double bytes, double seconds) {
  MeasuredOp m;
  m.op = "copy";
  m.shape = "n=" + std::to_string(bytes);
  m.dtype = "f32";
  m.bytes = bytes;
  m.memory = Unit::mem_copy;
  m.measured_s = seconds;
  return m;
}

TEST(ModelLoop, LeaveOneOutPrediction) {
  // Floors: 1 ms, 2 ms, 4 ms at 10 GB/s; efficiencies 50%, 50%, 80%.
  std::vector<MeasuredOp> ops = {copy_op(1e7, 2e-3), copy_op(2e7, 4e-3), copy_op(4e7, 5e-3)};
  auto p = predict_measured_ops(tiny_machine(), ops);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_NEAR(p[0].floor_s, 1e-3, 1e-12);
  EXPECT_EQ(p[0].peers, 2);
  EXPECT_NEAR(p[0].efficiency, 0.65, 1e-12);  // median of 0.5 and 0.8
  EXPECT_NEAR(p[2].efficiency, 0.5, 1e-12);
  EXPECT_NEAR(p[2].predicted_s, 8e-3, 1e-12);
  EXPECT_NEAR(p[2].error_pct, 60.0, 1e-9);
  // An op's own time never enters its own prediction.
  ops[2].measured_s = 100.0;
  EXPECT_NEAR(predict_measured_ops(tiny_machine(), ops)[2].predicted_s, 8e-3, 1e-12);
}

// Peers come from the op's size regime (floors within 4x): a small copy is predicted from the
// small one beside it, flagged as a single peer, not from the large ones; a sample whose median
// run took 1.5x its fastest was cut by the scheduler and is neither predicted nor a peer.
TEST(ModelLoop, PeersFromTheSameSizeRegimeAndScheduledOutSamplesDropped) {
  std::vector<MeasuredOp> ops = {copy_op(1e7, 2e-3), copy_op(1.5e7, 3e-3), copy_op(1e9, 0.11),
                                 copy_op(1.2e9, 0.13), copy_op(1.1e9, 0.5)};
  for (auto& m : ops) m.min_s = m.measured_s;
  ops[4].min_s = 0.2;  // median 2.5x the fastest run
  auto p = predict_measured_ops(tiny_machine(), ops);
  EXPECT_EQ(p[0].regime, "size");
  EXPECT_EQ(p[0].peers, 1);
  EXPECT_TRUE(p[0].single_peer);
  EXPECT_NEAR(p[0].efficiency, 0.5, 1e-12);
  EXPECT_NEAR(p[2].efficiency, 120.0 / 130, 1e-12);  // only the other large copy: 4 was dropped
  EXPECT_FALSE(p[4].dropped.empty());
  EXPECT_EQ(p[4].peers, 0);
  // Without a peer in its regime an op borrows from its dtype, then from any dtype.
  std::vector<MeasuredOp> two = {copy_op(1e7, 2e-3), copy_op(1e9, 0.2)};
  auto q = predict_measured_ops(tiny_machine(), two);
  EXPECT_EQ(q[0].regime, "dtype");
  EXPECT_NEAR(q[0].efficiency, 0.5, 1e-12);
}

TEST(ModelLoop, OpsWithoutPeersAreNotPredicted) {
  std::vector<MeasuredOp> ops = {copy_op(1e7, 2e-3)};
  ops.push_back(copy_op(1e7, 2e-3));
  ops[1].threads = 2;
  for (const auto& p : predict_measured_ops(tiny_machine(), ops)) EXPECT_EQ(p.peers, 0);
}

TEST(ModelLoop, BadReportsAreNamed) {
  MachineProfile m;
  std::vector<MeasuredOp> ops;
  EXPECT_THROW(load_report("/nonexistent/report.json", m, ops), Error);
  std::string path = testing::TempDir() + "sol_bad_report.json";
  {
    std::ofstream f(path);
    f << R"({"machine": )" << tiny_machine().to_json() << R"(, "records": [{"op": "copy"}]})";
  }
  try {
    load_report(path, m, ops);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("records[0]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'shape'"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace sol
