#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ops/common/fill.h"
#include "ops/isa_paths.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/softmax.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

TEST(Softmax, MasksNaNAndInfinityRows) {
  for_each_isa([] {
    const int64_t n = 37;
    Buffer x(DType::f32, {4, n}), y(DType::f32, {4, n});
    fill_random(x, 2, 5.0);
    float* p = x.tensor().data_as<float>();
    for (int64_t i = 0; i < n; i += 2) p[i] = -INFINITY;  // row 0: half masked
    p[n + 5] = NAN;                                        // row 1: NaN
    p[2 * n + 7] = INFINITY;                               // row 2: +inf
    softmax(x, y);
    const float* q = y.tensor().data_as<float>();
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (i % 2 == 0) {
        EXPECT_EQ(q[i], 0.0f);
      }
      sum += q[i];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6);
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(q[n + i]));
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(q[2 * n + i]));
    sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += q[3 * n + i];
    EXPECT_NEAR(sum, 1.0, 1e-6);
  });
}

TEST(Softmax, InPlaceAndHigherRank) {
  Buffer x(DType::bf16, {2, 3, 100}), y(DType::bf16, {2, 3, 100});
  fill_random(x, 5);
  softmax(x, y);
  softmax(x, x);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), size_t(x.tensor().nbytes())), 0);
}

TEST(Softmax, BadInputIsNamed) {
  Buffer x(DType::f32, {4, 8}), y(DType::f32, {4, 9}), yi(DType::i32, {4, 8});
  EXPECT_THROW(softmax(x, y), Error);
  EXPECT_THROW(softmax(x, yi), Error);
  EXPECT_THROW(softmax(x.tensor().slice(1, 0, 4), Buffer(DType::f32, {4, 4}).tensor()), Error);
  EXPECT_THROW(softmax(x.tensor().slice(0, 0, 2), x.tensor().slice(0, 1, 3)), Error);  // partial overlap
}

}  // namespace
}  // namespace sol
