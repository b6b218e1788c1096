// `sol tune`'s streaming case: its sizes reach from what L2 holds to past the reported LLC, so
// the threshold it picks is measured on both sides of where streaming stops losing; its
// workload runs at either end of the candidates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "ops/tune/tune_cases.h"
#include "sol/tuning.h"

namespace sol {
namespace {

constexpr int64_t kNever = int64_t(1) << 40;

TEST(TuneStream, SizesSpanL2ToPastTheLlc) {
  const std::vector<int64_t> c = tune_candidates("stream_min_bytes");
  ASSERT_GE(c.size(), 3u);
  EXPECT_EQ(c.back(), kNever);  // "never stream" is a candidate
  const std::vector<int64_t> sizes(c.begin(), c.end() - 1);
  EXPECT_TRUE(std::is_sorted(sizes.begin(), sizes.end()));
  for (size_t i = 1; i < sizes.size(); ++i) EXPECT_EQ(sizes[i], 2 * sizes[i - 1]);  // no gaps
  EXPECT_LE(sizes.front(), core_shape().l2_bytes / 2);  // a chain of three in L2: plain stores win
  // The largest chain (three buffers) is past the reported LLC, or at the 256 MiB memory cap.
  EXPECT_TRUE(3 * sizes.back() > core_shape().l3_bytes || sizes.back() == (256L << 20)) << sizes.back();
  EXPECT_GE(sizes.back(), 64L << 20);
  EXPECT_LE(sizes.back(), 256L << 20);
  // The default threshold lies inside the range timed, so the tune can move it either way.
  const int64_t def = default_tuning_params(core_shape()).stream_min_bytes;
  EXPECT_GT(def, sizes.front());
  EXPECT_LT(def, sizes.back());
}

TEST(TuneStream, TheCaseRunsUnderEveryCandidate) {
  const TuneCases cases = tune_cases("stream");
  ASSERT_EQ(cases.cases.size(), 1u);
  const TuneCase& c = cases.cases[0];
  EXPECT_EQ(c.param, "stream_min_bytes");
  EXPECT_NE(c.workload.find("chain"), std::string::npos);
  for (int64_t v : {c.candidates.front(), kNever}) {
    TuningParams p = tuning().params;
    p.stream_min_bytes = v;
    const ScopedTuning forced(p);
    EXPECT_NO_THROW(c.run());
  }
}

}  // namespace
}  // namespace sol
