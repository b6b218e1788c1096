// The selection kernels behind sampling's top-k filter: the AVX-512 k-th largest (quickselect
// on order keys, and its bitwise fallback) must agree with nth_element on every k, including
// duplicates, signed zeros, infinities, negative values and lengths that are not a multiple of
// 16; the cut must keep exactly the best k by (key, lower idx) in increasing idx; the filter
// must store order keys of exactly the elements above the threshold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/select.h"
#include "sol/hw.h"

namespace sol {
namespace {

std::vector<uint32_t> keys_of(const std::vector<float>& v) {
  std::vector<uint32_t> k(v.size() + kernels::kSelectSlack);
  for (size_t i = 0; i < v.size(); ++i) k[i] = kernels::order_key(v[i]);
  return k;
}

// Rows that stress the selection: random, a coarse grid (heavy ties), tiny (subnormal), all
// negative, ascending, descending, all equal, two values only.
std::vector<float> row_of(int variant, int64_t n, std::mt19937& rng) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float r = std::uniform_real_distribution<float>(-30.0f, 30.0f)(rng);
    float x = r;
    switch (variant) {
      case 1: x = std::round(r / 8); break;
      case 2: x = r * 1e-39f; break;
      case 3: x = -std::fabs(r); break;
      case 4: x = float(i); break;
      case 5: x = float(n - i); break;
      case 6: x = 2.5f; break;
      case 7: x = r > 0 ? 1.0f : -1.0f; break;
    }
    v[size_t(i)] = x;
  }
  if (n > 3 && variant < 4) v[1] = -0.0f, v[2] = 0.0f, v[3] = -INFINITY;
  if (n > 5 && variant == 3) v[4] = INFINITY;
  return v;
}

TEST(SamplingSelect, OrderKeysFollowTheFloats) {
  const float xs[] = {-INFINITY, -3e38f, -1.5f, -1e-45f, -0.0f, 0.0f, 1e-45f, 1e-38f, 2.0f, 3e38f, INFINITY};
  for (size_t i = 0; i < std::size(xs); ++i) {
    EXPECT_EQ(kernels::key_value(kernels::order_key(xs[i])), xs[i]);
    EXPECT_EQ(std::signbit(kernels::key_value(kernels::order_key(xs[i]))), std::signbit(xs[i]));
    if (i > 0) {
      EXPECT_LT(kernels::order_key(xs[i - 1]), kernels::order_key(xs[i])) << xs[i];
    }
  }
}

TEST(SamplingSelect, KthLargestMatchesNthElement) {
  if (cpu_features().best_isa < Isa::avx512) GTEST_SKIP() << "no AVX-512 path";
  std::mt19937 rng(7);
  for (int64_t n : {1, 2, 15, 16, 17, 31, 100, 357, 1380}) {
    for (int variant = 0; variant < 8; ++variant) {
      const std::vector<float> v = row_of(variant, n, rng);
      const std::vector<uint32_t> key = keys_of(v);
      std::vector<uint32_t> scratch(size_t(4 * (n + kernels::kSelectSlack)));
      for (int64_t k = 1; k <= n; k += (n > 40 ? 7 : 1)) {
        const kernels::KthKey want = kernels::kth_largest_scalar(key.data(), n, k);
        for (const kernels::KthKey got :
             {kernels::kth_largest_avx512(key.data(), n, k, scratch.data()), kernels::kth_largest_bitwise_avx512(key.data(), n, k)}) {
          ASSERT_EQ(got.key, want.key) << "n " << n << " k " << k << " variant " << variant;
          ASSERT_EQ(got.above, want.above) << "n " << n << " k " << k << " variant " << variant;
        }
        // The answer is a key of the row, with fewer than k keys above it and at least k at or above.
        EXPECT_NE(std::find(key.begin(), key.begin() + n, want.key), key.begin() + n);
        EXPECT_LT(std::count_if(key.begin(), key.begin() + n, [&](uint32_t x) { return x > want.key; }), k);
        EXPECT_GE(std::count_if(key.begin(), key.begin() + n, [&](uint32_t x) { return x >= want.key; }), k);
      }
    }
  }
}

// The cut against a plain stable sort of (key desc, idx asc), the survivors listed back in idx
// order; many keys equal to the k-th (the grid, all-equal and two-value rows) test that exactly
// the lowest ids among them are kept.
TEST(SamplingSelect, KeepBestKeepsTheBestKInIdOrder) {
  std::mt19937 rng(11);
  for (int64_t n : {1, 16, 17, 64, 65, 300, 1000}) {
    for (int variant = 0; variant < 8; ++variant) {
      const std::vector<float> v = row_of(variant, n, rng);
      for (int64_t k : {int64_t(1), std::min<int64_t>(n, 3), std::min<int64_t>(n, 50), n / 2 + 1, n}) {
        std::vector<int32_t> order(static_cast<size_t>(n));
        std::iota(order.begin(), order.end(), 0);
        const std::vector<uint32_t> key0 = keys_of(v);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key0[size_t(a)] > key0[size_t(b)]; });
        std::vector<int32_t> want(order.begin(), order.begin() + k);
        std::sort(want.begin(), want.end());
        for (bool avx512 : {false, true}) {
          if (avx512 && cpu_features().best_isa < Isa::avx512) continue;
          std::vector<uint32_t> key = key0, scratch(size_t(4 * (n + kernels::kSelectSlack)));
          std::vector<int32_t> idx(key.size(), -1);
          for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = int32_t(i * 3 + 5);  // ids need not be 0..n-1
          const uint32_t kth = (avx512 ? kernels::keep_best_avx512 : kernels::keep_best_scalar)(key.data(), idx.data(), n, k,
                                                                                                  scratch.data());
          ASSERT_EQ(kth, key0[size_t(order[size_t(k - 1)])]) << "n " << n << " k " << k << " variant " << variant;
          for (int64_t i = 0; i < k; ++i) {
            ASSERT_EQ(idx[size_t(i)], want[size_t(i)] * 3 + 5) << "n " << n << " k " << k << " variant " << variant << " avx512 " << avx512;
            ASSERT_EQ(key[size_t(i)], key0[size_t(want[size_t(i)])]);
          }
        }
      }
    }
  }
}

// The filter on f32 and bf16, lengths around the 64-element step, NaN and +-inf: the stored
// pairs are exactly the elements above the threshold, as order keys, in increasing index.
TEST(SamplingSelect, CollectAboveStoresExactlyTheElementsAbove) {
  std::mt19937 rng(3);
  for (DType t : {DType::f32, DType::bf16})
    for (int64_t n : {1, 15, 63, 64, 65, 129, 1000})
      for (float thr : {-INFINITY, 0.0f, 20.0f}) {
        std::vector<float> v = row_of(0, n, rng);
        if (n > 10) v[7] = NAN, v[9] = INFINITY;
        std::vector<uint16_t> h(v.size());
        for (size_t i = 0; i < v.size(); ++i) {
          h[i] = f32_to_bf16(v[i]);
          if (t == DType::bf16) v[i] = bf16_to_f32(h[i]);
        }
        std::vector<uint32_t> want_key;
        std::vector<int32_t> want_idx;
        for (int64_t i = 0; i < n; ++i)
          if (v[size_t(i)] > thr) want_key.push_back(kernels::order_key(v[size_t(i)])), want_idx.push_back(int32_t(i) + 100);
        for (bool avx512 : {false, true}) {
          if (avx512 && cpu_features().best_isa < Isa::avx512) continue;
          std::vector<uint32_t> key(size_t(n + kernels::kSelectSlack), 0xDEADu);
          std::vector<int32_t> idx(key.size(), -7);
          const void* x = t == DType::bf16 ? static_cast<const void*>(h.data()) : v.data();
          const int64_t got = (avx512 ? kernels::collect_above_avx512 : kernels::collect_above_scalar)(x, t, n, thr, 100,
                                                                                                      key.data(), idx.data());
          ASSERT_EQ(got, int64_t(want_key.size())) << dtype_name(t) << " n " << n << " thr " << thr;
          EXPECT_TRUE(std::equal(want_key.begin(), want_key.end(), key.begin()));
          EXPECT_TRUE(std::equal(want_idx.begin(), want_idx.end(), idx.begin()));
        }
      }
}

// Best first: key larger, then id lower; sizes around the 8-lane blocks and past the rank
// sort's limit (kRankSortMax), with many equal keys (grid, all-equal, two-value rows), ids in
// no particular order.
TEST(SamplingSelect, OrderBestFirstMatchesAStableSort) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 2, 7, 8, 9, 50, 127, 128, 129, 300}) {
    for (int variant = 0; variant < 8; ++variant) {
      const std::vector<float> v = row_of(variant, n, rng);
      std::vector<int32_t> ids(static_cast<size_t>(n));
      std::iota(ids.begin(), ids.end(), 0);
      std::shuffle(ids.begin(), ids.end(), rng);
      std::vector<std::pair<uint32_t, int32_t>> want;
      for (int64_t i = 0; i < n; ++i) want.push_back({kernels::order_key(v[size_t(i)]), ids[size_t(i)] * 2 + 1});
      std::sort(want.begin(), want.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
      for (bool avx512 : {false, true}) {
        if (avx512 && cpu_features().best_isa < Isa::avx512) continue;
        std::vector<uint32_t> key = keys_of(v);
        std::vector<int32_t> idx(key.size());
        for (int64_t i = 0; i < n; ++i) idx[size_t(i)] = ids[size_t(i)] * 2 + 1;
        std::vector<uint64_t> scratch(size_t(n + kernels::kSelectSlack));
        (avx512 ? kernels::order_best_first_avx512 : kernels::order_best_first_scalar)(key.data(), idx.data(), n, scratch.data());
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(key[size_t(i)], want[size_t(i)].first) << "n " << n << " variant " << variant << " at " << i;
          ASSERT_EQ(idx[size_t(i)], want[size_t(i)].second) << "n " << n << " variant " << variant << " at " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace sol
