#include <gtest/gtest.h>

#include <cmath>

#include "ops/common/compare.h"
#include "sol/tensor.h"

namespace sol {
namespace {

TEST(Compare, BitwiseDetectsOneFlippedBit) {
  float a[5] = {1, 2, 3, 4, 5}, b[5] = {1, 2, 3, 4, 5};
  Tensor ta(a, DType::f32, {5}), tb(b, DType::f32, {5});
  EXPECT_TRUE(compare_bitwise(ta, tb).pass);
  b[3] = std::nextafter(4.0f, 5.0f);
  CheckResult r = compare_bitwise(ta, tb);
  EXPECT_FALSE(r.pass);
  EXPECT_NE(r.detail.find("index 3"), std::string::npos) << r.detail;
  b[3] = -0.0f, a[3] = 0.0f;
  EXPECT_FALSE(compare_bitwise(ta, tb).pass);  // signed zero is a different result
}

TEST(Compare, RelativeNormAndNaNs) {
  float out[4] = {1, 2, 3, 4}, ref[4] = {1, 2, 3, 4.001f};
  Tensor to(out, DType::f32, {4}), tr(ref, DType::f32, {4});
  CheckResult r = compare_relative(to, tr, 1e-3);
  EXPECT_TRUE(r.pass);
  EXPECT_NEAR(r.error, 0.001 / std::sqrt(30.008), 1e-6);
  EXPECT_FALSE(compare_relative(to, tr, 1e-5).pass);
  out[0] = NAN;
  EXPECT_FALSE(compare_relative(to, tr, 1.0).pass);  // a NaN the reference lacks fails at any tolerance
  ref[0] = NAN;
  EXPECT_TRUE(compare_relative(to, tr, 1e-3).pass);  // propagated NaN matches
  out[1] = INFINITY;
  EXPECT_FALSE(compare_relative(to, tr, 1.0).pass);
}

}  // namespace
}  // namespace sol
