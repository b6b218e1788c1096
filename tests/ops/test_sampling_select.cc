// The k-th largest kernels behind sampling's top-k cut: the AVX-512 one (bitwise, branch-free)
// must agree with nth_element on every k, including duplicates, signed zeros, infinities,
// negative values and lengths that are not a multiple of 16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/select.h"
#include "sol/hw.h"

namespace sol {
namespace {

TEST(SamplingSelect, KthLargestMatchesNthElement) {
  if (cpu_features().best_isa < Isa::avx512) GTEST_SKIP() << "no AVX-512 path";
  std::mt19937 rng(7);
  for (int64_t n : {1, 2, 15, 16, 17, 100, 357, 1380}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int variant = 0; variant < 4; ++variant) {
      for (auto& x : v) {
        const float r = std::uniform_real_distribution<float>(-30.0f, 30.0f)(rng);
        x = variant == 0 ? r : variant == 1 ? std::round(r / 8) : variant == 2 ? r * 1e-39f : -std::fabs(r);
      }
      if (n > 3) v[1] = -0.0f, v[2] = 0.0f, v[3] = -INFINITY;
      if (n > 5 && variant == 3) v[4] = INFINITY;
      for (int64_t k = 1; k <= n; k += (n > 40 ? 7 : 1)) {
        const float want = kernels::kth_largest_scalar(v.data(), n, k);
        const float got = kernels::kth_largest_avx512(v.data(), n, k);
        ASSERT_EQ(got, want) << "n " << n << " k " << k << " variant " << variant;  // -0 == +0
        // got must be an element of v, with fewer than k elements above it and at least k at or above.
        EXPECT_NE(std::find(v.begin(), v.end(), got), v.end());
        EXPECT_LT(std::count_if(v.begin(), v.end(), [&](float x) { return x > got; }), k);
        EXPECT_GE(std::count_if(v.begin(), v.end(), [&](float x) { return x >= got; }), k);
      }
    }
  }
}

}  // namespace
}  // namespace sol
