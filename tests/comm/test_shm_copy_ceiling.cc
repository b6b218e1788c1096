// The inter-process copy ceiling `sol hw` reports: real forked processes copying through a
// shared mapping (no MPI). Rates are not asserted (speed lives in benchmarks); shape and
// validity are.
#include <gtest/gtest.h>

#include "sol/comm_bench.h"
#include "sol/error.h"

namespace {

TEST(ShmCopyCeiling, ForkedRanksReportEverySize) {
  const auto rows = sol::comm::measure_shm_copy_ceilings({2, 3}, {4096, size_t(256) << 10});
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].ranks, i < 2 ? 2 : 3);
    EXPECT_EQ(rows[i].bytes, i % 2 == 0 ? 4096u : size_t(256) << 10);
    EXPECT_GT(rows[i].gbps, 0.0);
  }
}

TEST(ShmCopyCeiling, RankCountOutsideTheRangeIsRefused) {
  EXPECT_THROW(sol::comm::measure_shm_copy_ceilings({1}, {4096}), sol::Error);
  EXPECT_THROW(sol::comm::measure_shm_copy_ceilings({33}, {4096}), sol::Error);
  EXPECT_THROW(sol::comm::measure_shm_copy_ceilings({2}, {}), sol::Error);
}

}  // namespace
