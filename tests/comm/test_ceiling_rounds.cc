// The copy ceiling's rounds are bounded in time whatever --iters asks (ceiling_batches.h).
#include <gtest/gtest.h>

#include "comm/bench/ceiling_batches.h"

namespace sol::comm {
namespace {

TEST(CeilingRounds, IterationsAreCutToTheRoundBudget) {
  // 64 MiB at ~10 GB/s is ~6.7 ms a copy: --iters 100000 would copy for 11 minutes a round.
  EXPECT_EQ(repetitions_within(0.0067, 100000, 0.25), 37);
  EXPECT_LE(repetitions_within(0.0067, 100000) * 0.0067, kCeilingRoundSeconds);
}

TEST(CeilingRounds, FewIterationsAreKept) {
  EXPECT_EQ(repetitions_within(1e-6, 5, 0.25), 5);
  EXPECT_EQ(repetitions_within(0.001, 200, 0.25), 200);
}

TEST(CeilingRounds, AtLeastOneRepetition) {
  EXPECT_EQ(repetitions_within(3.0, 100, 0.25), 1);
  EXPECT_EQ(repetitions_within(0.01, 0, 0.25), 1);
  // An idle rank (time 0 everywhere) runs what was asked: it copies nothing anyway.
  EXPECT_EQ(repetitions_within(0.0, 7, 0.25), 7);
}

}  // namespace
}  // namespace sol::comm
