#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/norm/reference.h"
#include "ops/isa_paths.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/norm.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

TEST(RmsNorm, MatchesFp64ReferenceOddShapes) {
  for_each_isa([] {
    for (DType dt : {DType::f32, DType::bf16})
      for (auto [rows, h] : {std::pair<int64_t, int64_t>{1, 1}, {3, 17}, {9, 1000}, {2, 7168}}) {
        Buffer x(dt, {rows, h}), w(DType::f32, {h}), y(dt, {rows, h}), ref(dt, {rows, h});
        fill_random(x, uint64_t(rows * h), 3.0);
        fill_random(w, 4, 2.0);
        poison(y);
        rmsnorm(x, w, y);
        reference::rmsnorm(x, w, ref, 1e-6);
        CheckResult r = compare_relative(y, ref, dt == DType::f32 ? 1e-5 : 8e-3);
        EXPECT_TRUE(r.pass) << dtype_name(dt) << " " << rows << "x" << h << ": " << r.detail;
      }
  });
}

TEST(RmsNorm, ScalarAndVectorPathsAgreeBitForBit) {
  if (cpu_features().best_isa < Isa::avx512) GTEST_SKIP() << "no AVX-512 path on this CPU";
  const int64_t rows = 11, h = 1531;
  Buffer x(DType::bf16, {rows, h}), w(DType::bf16, {h}), a(DType::bf16, {rows, h}), b(DType::bf16, {rows, h});
  fill_random(x, 8);
  fill_random(w, 9);
  setenv("SOL_ISA", "scalar", 1);
  rmsnorm(x, w, a);
  setenv("SOL_ISA", "avx512", 1);
  rmsnorm(x, w, b);
  unsetenv("SOL_ISA");
  EXPECT_EQ(std::memcmp(a.data(), b.data(), size_t(rows * h * 2)), 0);
}

TEST(RmsNorm, ThreadCountDoesNotChangeBits) {
  const int64_t rows = 64, h = 4096;
  Buffer x(DType::bf16, {rows, h}), w(DType::bf16, {h}), a(DType::bf16, {rows, h}), b(DType::bf16, {rows, h});
  fill_random(x, 1);
  fill_random(w, 2);
  set_num_threads(1);
  rmsnorm(x, w, a);
  set_num_threads(2);
  rmsnorm(x, w, b);
  set_num_threads(0);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), size_t(rows * h * 2)), 0);
}

TEST(RmsNorm, ResidualFusionStoresTheSumAndNormalisesIt) {
  for_each_isa([] {
    const int64_t rows = 5, h = 300;
    Buffer x(DType::bf16, {rows, h}), res(DType::bf16, {rows, h}), w(DType::bf16, {h}), y(DType::bf16, {rows, h});
    Buffer expect_res(DType::bf16, {rows, h}), ref(DType::bf16, {rows, h});
    fill_random(x, 3);
    fill_random(res, 4);
    fill_random(w, 5);
    for (int64_t i = 0; i < rows * h; ++i)
      store_from_double(expect_res.data(), DType::bf16, size_t(i),
                        double(bf16_to_f32(res.tensor().data_as<uint16_t>()[i]) + bf16_to_f32(x.tensor().data_as<uint16_t>()[i])));
    add_rmsnorm(x, res, w, y);
    EXPECT_EQ(std::memcmp(res.data(), expect_res.data(), size_t(rows * h * 2)), 0);
    reference::rmsnorm(expect_res, w, ref, 1e-6);
    EXPECT_TRUE(compare_relative(y, ref, 8e-3).pass);
  });
}

TEST(RmsNorm, QuantFusionEqualsComposition) {
  for_each_isa([] {
    const int64_t rows = 21, h = 1024;
    Buffer x(DType::bf16, {rows, h}), w(DType::f32, {h}), normed(DType::bf16, {rows, h});
    Buffer q(DType::f8e4m3, {rows, h}), s(DType::f32, {rows, 8}), q2(DType::f8e4m3, {rows, h}), s2(DType::f32, {rows, 8});
    fill_random(x, 6);
    fill_random(w, 7);
    rmsnorm(x, w, normed);
    quant_fp8_per_token(normed, q, s);
    poison(q2);
    poison(s2);
    rmsnorm_quant_fp8(x, w, q2, s2);
    EXPECT_EQ(std::memcmp(q.data(), q2.data(), size_t(rows * h)), 0);
    EXPECT_EQ(std::memcmp(s.data(), s2.data(), size_t(rows * 8 * 4)), 0);
  });
}

TEST(RmsNorm, QuantFusionEqualsCompositionEveryGroupAndScale) {
  // The AVX-512 fusion takes each group's abs-max in the norm's output pass (groups a multiple
  // of 64; others go through the row quantizer): every path must give the bits of rmsnorm to
  // bf16 followed by quant_fp8_per_token. Rows: random, a NaN (its group's scale and codes NaN),
  // values whose outputs are bf16 subnormals, all zeros, and negatives only.
  for_each_isa([] {
    for (DType xt : {DType::bf16, DType::f32})
      for (int64_t group : {64, 128, 192, 80})
        for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0}) {
          const int64_t rows = 6, h = 1920;
          const QuantOptions qopt{group, sf};
          Buffer x(xt, {rows, h}), w(DType::bf16, {h}), normed(DType::bf16, {rows, h});
          Buffer q(DType::f8e4m3, {rows, h}), s(DType::f32, {rows, h / group});
          Buffer q2(DType::f8e4m3, {rows, h}), s2(DType::f32, {rows, h / group});
          fill_random(x, uint64_t(group), 3.0);
          fill_random(w, 8, 2.0);
          store_from_double(x.data(), xt, size_t(h + 700), NAN);
          for (int64_t c = 0; c < h; ++c) {
            store_from_double(w.data(), DType::bf16, size_t(c), c % 5 == 0 ? 1e-38 : load_as_double(w.data(), DType::bf16, size_t(c)));
            store_from_double(x.data(), xt, size_t(3 * h + c), 0.0);
            store_from_double(x.data(), xt, size_t(4 * h + c), -std::fabs(load_as_double(x.data(), xt, size_t(4 * h + c))) - 0.25);
          }
          rmsnorm(x, w, normed);
          quant_fp8_per_token(normed, q, s, qopt);
          poison(q2);
          poison(s2);
          rmsnorm_quant_fp8(x, w, q2, s2, {}, qopt);
          EXPECT_EQ(std::memcmp(q.data(), q2.data(), size_t(rows * h)), 0)
              << dtype_name(xt) << " group " << group << (sf == ScaleFormat::ue8m0 ? " ue8m0" : " f32 scales");
          EXPECT_EQ(std::memcmp(s.data(), s2.data(), size_t(rows * (h / group) * 4)), 0)
              << dtype_name(xt) << " group " << group << (sf == ScaleFormat::ue8m0 ? " ue8m0" : " f32 scales");
        }
  });
}

TEST(RmsNorm, NaNRowStaysInItsRow) {
  const int64_t h = 64;
  Buffer x(DType::f32, {2, h}), w(DType::f32, {h}), y(DType::f32, {2, h});
  fill_random(x, 1);
  fill_random(w, 2);
  x.tensor().data_as<float>()[3] = NAN;
  rmsnorm(x, w, y);
  for (int64_t c = 0; c < h; ++c) EXPECT_TRUE(std::isnan(y.tensor().data_as<float>()[c]));
  for (int64_t c = h; c < 2 * h; ++c) EXPECT_TRUE(std::isfinite(y.tensor().data_as<float>()[c]));
}

TEST(RmsNorm, BadInputIsNamed) {
  Buffer x(DType::bf16, {4, 64}), w(DType::bf16, {63}), y(DType::bf16, {4, 64}), yi(DType::i8, {4, 64});
  try {
    rmsnorm(x, w, y);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rmsnorm: weight.shape = [63] but expected [64]"), std::string::npos) << e.what();
  }
  Buffer w64(DType::bf16, {64});
  EXPECT_THROW(rmsnorm(x, w64, yi), Error);
  EXPECT_THROW(rmsnorm(x, w64, Buffer(DType::bf16, {4, 32}).tensor()), Error);
  EXPECT_THROW(add_rmsnorm(x, x, w64, y), Error);  // residual aliases x
  EXPECT_THROW(rmsnorm(x, w64, y, {-1.0f}), Error);
  Buffer q(DType::f8e4m3, {4, 64}), s(DType::f32, {4, 1});
  EXPECT_THROW(rmsnorm_quant_fp8(x, w64, q, s), Error);  // 64 % 128
}

}  // namespace
}  // namespace sol

namespace sol {
namespace {

TEST(LayerNorm, LargeMeanSmallSpreadStaysAccurate) {
  // Two-pass statistics: a one-pass E[x^2] - E[x]^2 would cancel catastrophically here.
  const int64_t h = 4096;
  Buffer x(DType::f32, {2, h}), w(DType::f32, {h}), y(DType::f32, {2, h}), ref(DType::f32, {2, h});
  fill_random(x, 3, 0.01);
  for (int64_t i = 0; i < 2 * h; ++i) x.tensor().data_as<float>()[i] += 1000.0f;
  for (int64_t i = 0; i < h; ++i) w.tensor().data_as<float>()[i] = 1.0f;
  testing_paths::for_each_isa([&] {
    layernorm(x, w, nullptr, y);
    reference::layernorm(x, w, nullptr, ref, 1e-6);
    CheckResult r = compare_relative(y, ref, 1e-3);
    EXPECT_TRUE(r.pass) << r.detail;
  });
}

TEST(LayerNorm, OutlierInTheShiftSampleStaysAccurate) {
  // The statistics shift by the mean of the first 256 elements: a huge outlier there, on a
  // large mean, is the worst case for the cancellation (bounded by log2(h / 256) bits), and
  // the result must still meet f32 accuracy. Row lengths below, at and above the sample.
  // f32 x with bf16 weight and bias takes the packed kernel (kernels/norm.h), f32 ones the f32
  // kernel; both share the scalar path's formula, which the bf16 even/odd kernel matches bit for
  // bit (tests/ops/test_norm_paths.cc).
  for (DType wt : {DType::f32, DType::bf16})
  for (int64_t h : {7, 256, 300, 7168}) {
    Buffer x(DType::f32, {3, h}), w(wt, {h}), b(wt, {h}), y(DType::f32, {3, h}), ref(DType::f32, {3, h});
    fill_random(x, uint64_t(h), 1.0);
    fill_random(w, 5, 2.0);
    fill_random(b, 6, 1.0);
    float* xs = x.tensor().data_as<float>();
    for (int64_t i = 0; i < 3 * h; ++i) xs[i] += 300.0f;
    xs[0] = 3.0e6f;            // row 0: an outlier at the start of the sample
    xs[h + h / 2] = -2.0e5f;   // row 1: an outlier past it (within it for short rows)
    testing_paths::for_each_isa([&] {
      poison(y);
      layernorm(x, w, &b.tensor(), y);
      reference::layernorm(x, w, &b.tensor(), ref, 1e-6);
      CheckResult r = compare_relative(y, ref, 1e-5);
      EXPECT_TRUE(r.pass) << dtype_name(wt) << " h=" << h << ": " << r.detail;
    });
  }
}

TEST(LayerNorm, InfOrNaNMakesItsRowNaN) {
  // An inf makes the row's variance inf - inf: the whole row is NaN (not -inf or a finite
  // value from a variance clamped to 0), the other rows are untouched.
  const int64_t h = 1000;
  for (float bad : {INFINITY, -INFINITY, NAN})
    for (int64_t col : {int64_t(3), int64_t(700)}) {  // in the shift sample, and past it
      Buffer x(DType::bf16, {3, h}), w(DType::bf16, {h}), y(DType::bf16, {3, h}), ref(DType::bf16, {3, h});
      fill_random(x, 9, 2.0);
      fill_random(w, 10, 1.0);
      store_from_double(x.data(), DType::bf16, size_t(h + col), bad);
      Buffer b(DType::bf16, {h});
      fill_random(b, 11, 1.0);
      // With a bias, bf16 rows take the kernel that sums row r + 1 while writing row r.
      for (const Tensor* bias : {static_cast<const Tensor*>(nullptr), &b.tensor()})
      testing_paths::for_each_isa([&] {
        poison(y);
        layernorm(x, w, bias, y);
        for (int64_t c = 0; c < h; ++c)
          ASSERT_TRUE(std::isnan(load_as_double(y.data(), DType::bf16, size_t(h + c)))) << bad << " col " << col << " c " << c;
        for (int64_t r : {0, 2})
          for (int64_t c = 0; c < h; ++c)
            ASSERT_TRUE(std::isfinite(load_as_double(y.data(), DType::bf16, size_t(r * h + c))));
      });
    }
}

TEST(LayerNorm, BadBiasIsNamed) {
  Buffer x(DType::bf16, {2, 8}), w(DType::bf16, {8}), b(DType::f32, {8}), y(DType::bf16, {2, 8});
  try {
    layernorm(x, w, &b.tensor(), y);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layernorm: bias"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sol
