#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

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

// A GPU does not carry NaN payloads through arithmetic as x86 does: NanBits::any
// matches NaN with NaN whatever the payload or sign, and nothing else.
TEST(Compare, BitwiseNanBitsAnyMatchesNaNsOnly) {
  const uint32_t a[4] = {0x7fc00000u, 0xffc00000u, 0x3f800000u, 0x7fffffffu};
  uint32_t b[4] = {0x7fffffffu, 0x7fffffffu, 0x3f800000u, 0x7fffffffu};
  Tensor ta(const_cast<uint32_t*>(a), DType::f32, {4}), tb(b, DType::f32, {4});
  EXPECT_FALSE(compare_bitwise(ta, tb).pass);  // exact by default: the payloads differ
  EXPECT_TRUE(compare_bitwise(ta, tb, NanBits::any).pass);
  b[2] = 0x3f800001u;
  EXPECT_FALSE(compare_bitwise(ta, tb, NanBits::any).pass);  // a number still must match bit for bit
  b[2] = 0x3f800000u, b[3] = 0x3f800000u;
  EXPECT_FALSE(compare_bitwise(ta, tb, NanBits::any).pass);  // a number where the reference has NaN
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
