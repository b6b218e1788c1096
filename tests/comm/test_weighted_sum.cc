// The EP combine's weighted sum (kernels/weighted_sum.h) promises the same bits on every level:
// products and sums rounded separately, in row order. Rows of random bf16 values with weights
// that make the products inexact, lengths around both vector widths, 1 to 9 rows.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/weighted_sum.h"
#include "sol/dtype.h"
#include "sol/hw.h"

namespace sol {
namespace {

TEST(WeightedSum, EveryLevelGivesThePortableBits) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-4, 4), weight(0.01f, 1.3f);
  for (int count : {1, 2, 3, 8, 9})
    for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 100, 7168}) {
      std::vector<std::vector<uint16_t>> rows(static_cast<size_t>(count), std::vector<uint16_t>(static_cast<size_t>(n)));
      std::vector<const uint16_t*> pointers;
      std::vector<float> weights;
      for (auto& r : rows) {
        for (auto& x : r) x = f32_to_bf16(value(rng));
        pointers.push_back(r.data());
        weights.push_back(weight(rng));
      }
      std::vector<uint16_t> want(static_cast<size_t>(n), 0xFFFF);
      kernels::weighted_sum_bf16_scalar(want.data(), pointers.data(), weights.data(), count, n);
      for (Isa level : {Isa::avx2, Isa::avx512}) {
        if (level > cpu_features().best_isa) continue;
        std::vector<uint16_t> got(static_cast<size_t>(n) + 1, 0xFFFF);
        (level == Isa::avx2 ? kernels::weighted_sum_bf16_avx2 : kernels::weighted_sum_bf16_avx512)(
            got.data(), pointers.data(), weights.data(), count, n);
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), size_t(n) * 2))
            << isa_name(level) << " rows=" << count << " n=" << n;
        EXPECT_EQ(got[size_t(n)], 0xFFFF) << "wrote past the row";
      }
    }
}

}  // namespace
}  // namespace sol
