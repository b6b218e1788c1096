#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <vector>

#include "ops/common/fill.h"
#include "sol/error.h"
#include "sol/dtype.h"
#include "sol/hw.h"
#include "sol/registry.h"
#include "sol/routing.h"
#include "kernels/sigmoid.h"

namespace sol {
namespace {

struct Routed {
  Buffer idx, w;
  Routed(int64_t t, int64_t k) : idx(DType::i32, {t, k}), w(DType::f32, {t, k}) {}
  int32_t i(int64_t t, int64_t j) const { return idx.tensor().data_as<int32_t>()[t * idx.tensor().shape(1) + j]; }
  float wt(int64_t t, int64_t j) const { return w.tensor().data_as<float>()[t * w.tensor().shape(1) + j]; }
};

TEST(MoeRouting, DeepSeekV3WeightsSumToScalingAndBiasOnlySteers) {
  const int64_t t = 64, e = 256;
  Buffer logits(DType::f32, {t, e}), bias(DType::f32, {e});
  fill_random(logits, 1, 3.0);
  for (int64_t i = 0; i < e; ++i) bias.tensor().data_as<float>()[i] = 0.0f;
  bias.tensor().data_as<float>()[200] = 100.0f;  // expert 200 always wins its group and the top-k
  Routed r(t, 8);
  RoutingOptions o = deepseek_v3_routing(&bias.tensor());
  moe_routing(logits, r.idx, r.w, o);
  for (int64_t k = 0; k < t; ++k) {
    EXPECT_EQ(r.i(k, 0), 200);
    float sum = 0;
    for (int j = 0; j < 8; ++j) sum += r.wt(k, j);
    EXPECT_NEAR(sum, 2.5f, 1e-5f);
    // The bias steers the choice only: the weight is a share of the unbiased scores.
    EXPECT_LT(r.wt(k, 0), 2.5f);
    EXPECT_GT(r.wt(k, 0), 0.0f);
    // At most 4 groups of 32 are used.
    int groups = 0;
    for (int g = 0; g < 8; ++g) {
      bool used = false;
      for (int j = 0; j < 8; ++j) used |= r.i(k, j) / 32 == g;
      groups += used;
    }
    EXPECT_LE(groups, 4);
  }
}

TEST(MoeRouting, TiesGoToLowerIndicesAndNaNIsNeverPreferred) {
  for (Isa isa : {Isa::scalar, Isa::avx512}) {
    if (isa > cpu_features().best_isa) continue;
    setenv("SOL_ISA", std::string(isa_name(isa)).c_str(), 1);
    Buffer logits(DType::f32, {2, 16});
    float* l = logits.tensor().data_as<float>();
    for (int i = 0; i < 32; ++i) l[i] = 1.0f;
    l[0] = NAN;  // token 0: expert 0 is NaN
    Routed r(2, 4);
    RoutingOptions o;
    o.top_k = 4;
    moe_routing(logits, r.idx, r.w, o);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(r.i(0, j), j + 1) << isa_name(isa);
    for (int j = 0; j < 4; ++j) EXPECT_EQ(r.i(1, j), j);
    EXPECT_FLOAT_EQ(r.wt(1, 0), 0.25f);
  }
  unsetenv("SOL_ISA");
}

TEST(MoeRouting, TooFewNumbersMakesTheTokenLoudlyNaN) {
  Buffer logits(DType::f32, {1, 4});
  float* l = logits.tensor().data_as<float>();
  l[0] = 1, l[1] = NAN, l[2] = NAN, l[3] = NAN;
  Routed r(1, 2);
  RoutingOptions o;
  o.top_k = 2;
  moe_routing(logits, r.idx, r.w, o);
  EXPECT_EQ(r.i(0, 0), 0);
  EXPECT_EQ(r.i(0, 1), 1);  // the lowest-index NaN fills the last slot...
  EXPECT_TRUE(std::isnan(r.wt(0, 0)));  // ...and the weights say so
  EXPECT_TRUE(std::isnan(r.wt(0, 1)));
}

// The AVX2 sigmoid (exp_avx2.h) gives the scalar row's bits: over [-120, 120] (both clamps of
// the exponential), infinities, NaN, both dtypes and lengths that leave a tail.
TEST(MoeRouting, Avx2SigmoidGivesTheScalarBits) {
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no AVX2 here";
  for (int64_t n : {4803, 13, 7}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i - n / 2) * (n > 100 ? 0.05f : 17.1f);
    v[0] = -INFINITY;
    v[size_t(n / 3)] = INFINITY;
    v[size_t(n - 1)] = NAN;
    std::vector<uint16_t> h(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) h[size_t(i)] = f32_to_bf16(v[size_t(i)]);
    for (DType t : {DType::f32, DType::bf16}) {
      const void* x = t == DType::f32 ? static_cast<const void*>(v.data()) : h.data();
      std::vector<float> a(static_cast<size_t>(n), 7.0f), b(static_cast<size_t>(n), 7.0f);
      kernels::sigmoid_row_scalar(x, t, a.data(), n);
      kernels::sigmoid_row_avx2(x, t, b.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        uint32_t ba, bb;
        std::memcpy(&ba, &a[size_t(i)], 4);
        std::memcpy(&bb, &b[size_t(i)], 4);
        ASSERT_TRUE(ba == bb || (std::isnan(a[size_t(i)]) && std::isnan(b[size_t(i)])))
            << dtype_name(t) << " n=" << n << " x=" << v[size_t(i)] << " scalar " << a[size_t(i)] << " avx2 " << b[size_t(i)];
      }
    }
  }
}

TEST(MoeRouting, SigmoidScoresMatchFp64) {
  const int64_t n = 4001;
  Buffer x(DType::f32, {n});
  float* v = x.tensor().data_as<float>();
  for (int64_t i = 0; i < n; ++i) v[i] = float(i - n / 2) * 0.05f;  // [-100, 100]
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  kernels::sigmoid_row_scalar(v, DType::f32, a.data(), n);
  if (cpu_features().best_isa >= Isa::avx512) kernels::sigmoid_row_avx512(v, DType::f32, b.data(), n);
  else b = a;
  for (int64_t i = 0; i < n; ++i) {
    double ref = 1.0 / (1.0 + std::exp(-double(v[i])));
    EXPECT_NEAR(a[size_t(i)], ref, 2e-7 * ref + 1e-30) << v[i];
    EXPECT_NEAR(b[size_t(i)], ref, 4e-7 * ref + 1e-30) << v[i];
  }
}

// The fused sigmoid kernel reads bf16 rows itself: a bf16 row must route exactly as its exact
// f32 widening does (same scores, so the same experts and the same weight bits), with groups
// (DeepSeek-V3) and without.
TEST(MoeRouting, Bf16LogitsRouteAsTheirF32Widening) {
  for (int64_t groups : {8, 1}) {
    const int64_t t = 37, e = 256;
    Buffer l16(DType::bf16, {t, e}), l32(DType::f32, {t, e}), bias(DType::f32, {e});
    fill_random(l16, 5, 3.0);
    fill_random(bias, 6, 0.1);
    for (int64_t i = 0; i < t * e; ++i)
      l32.tensor().data_as<float>()[i] = bf16_to_f32(l16.tensor().data_as<uint16_t>()[i]);
    RoutingOptions o = deepseek_v3_routing(&bias.tensor());
    o.n_group = groups;
    o.topk_group = groups == 1 ? 1 : 4;
    Routed a(t, 8), b(t, 8);
    moe_routing(l16, a.idx, a.w, o);
    moe_routing(l32, b.idx, b.w, o);
    for (int64_t k = 0; k < t; ++k)
      for (int j = 0; j < 8; ++j) {
        EXPECT_EQ(a.i(k, j), b.i(k, j)) << groups << " " << k << " " << j;
        const float wa = a.wt(k, j), wb = b.wt(k, j);
        EXPECT_EQ(std::memcmp(&wa, &wb, 4), 0) << groups << " " << k << " " << j;
      }
  }
}

// Softmax over a few experts runs one token per lane on AVX-512: ties, NaN and k = experts
// on both paths, for 1 token and for a count that leaves a partial step of 16.
TEST(MoeRouting, FewExpertSoftmaxTiesNaNAndAllExperts) {
  for (Isa isa : {Isa::scalar, Isa::avx512}) {
    if (isa > cpu_features().best_isa) continue;
    setenv("SOL_ISA", std::string(isa_name(isa)).c_str(), 1);
    for (int64_t t : {1, 19}) {
      const int64_t e = 8;
      Buffer logits(DType::f32, {t, e});
      fill_random(logits, 9, 2.0);
      float* l = logits.tensor().data_as<float>();
      const int64_t tie = t - 1;  // the last token: every expert equal but expert 6, larger
      for (int64_t i = 0; i < e; ++i) l[tie * e + i] = i == 6 ? 1.0f : 0.25f;
      RoutingOptions o;
      o.scoring = Scoring::softmax;
      o.top_k = 3;
      Routed r(t, 3);
      moe_routing(logits, r.idx, r.w, o);
      EXPECT_EQ(r.i(tie, 0), 6) << isa_name(isa);
      EXPECT_EQ(r.i(tie, 1), 0) << isa_name(isa);
      EXPECT_EQ(r.i(tie, 2), 1) << isa_name(isa);
      EXPECT_NEAR(r.wt(tie, 1), r.wt(tie, 2), 0.0f);
      if (t > 1) {
        l[2 * e + 5] = NAN;  // token 2: a NaN logit makes its scores NaN: experts by index, NaN weights
        o.top_k = e;         // and k = every expert
        Routed all(t, e);
        moe_routing(logits, all.idx, all.w, o);
        for (int j = 0; j < e; ++j) {
          EXPECT_EQ(all.i(2, j), j) << isa_name(isa);
          EXPECT_TRUE(std::isnan(all.wt(2, j))) << isa_name(isa);
        }
        for (int64_t k = 0; k < t; ++k) {
          if (k == 2) continue;
          std::vector<bool> seen(size_t(e), false);
          float sum = 0;
          for (int j = 0; j < e; ++j) {
            seen[size_t(all.i(k, j))] = true;
            sum += all.wt(k, j);
            if (j > 0) {
              EXPECT_GE(l[k * e + all.i(k, j - 1)], l[k * e + all.i(k, j)]);
            }
          }
          EXPECT_EQ(std::count(seen.begin(), seen.end(), true), e);
          EXPECT_NEAR(sum, 1.0f, 1e-5f);
        }
      }
    }
  }
  unsetenv("SOL_ISA");
}

// i64 indices (DeepEP's and PyTorch's type) are the i32 ones widened, on every path: the fused
// sigmoid kernel (V3), the per-lane softmax (8 experts), the general one (24 experts, 3 groups);
// the weights are the same bits. Poisoned i64 outputs: a lane left unwritten shows.
TEST(MoeRouting, I64IndicesAreTheI32OnesWidened) {
  struct Case { int64_t t, e, k, groups, keep; Scoring s; };
  for (const Case c : {Case{37, 256, 8, 8, 4, Scoring::sigmoid}, Case{35, 8, 2, 1, 1, Scoring::softmax},
                       Case{19, 24, 5, 3, 2, Scoring::sigmoid}, Case{1, 16, 16, 1, 1, Scoring::softmax}}) {
    Buffer logits(DType::f32, {c.t, c.e});
    fill_random(logits, uint64_t(c.e), 2.0);
    RoutingOptions o;
    o.top_k = c.k;
    o.n_group = c.groups;
    o.topk_group = c.keep;
    o.scoring = c.s;
    o.scaling = 2.5f;
    Routed narrow(c.t, c.k);
    moe_routing(logits, narrow.idx, narrow.w, o);
    Buffer wide(DType::i64, {c.t, c.k}), w(DType::f32, {c.t, c.k});
    std::memset(wide.data(), 0xA5, wide.bytes());
    moe_routing(logits, wide, w, o);
    for (int64_t i = 0; i < c.t * c.k; ++i) {
      ASSERT_EQ(wide.tensor().data_as<int64_t>()[i], int64_t(narrow.i(i / c.k, i % c.k))) << "e " << c.e << " at " << i;
      ASSERT_EQ(w.tensor().data_as<float>()[i], narrow.wt(i / c.k, i % c.k)) << "e " << c.e << " at " << i;
    }
  }
  // Other index types are named.
  Buffer logits(DType::f32, {2, 8}), idx(DType::u8, {2, 2}), w(DType::f32, {2, 2});
  RoutingOptions o;
  o.top_k = 2;
  try {
    moe_routing(logits, idx, w, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("i32 or i64"), std::string::npos) << e.what();
  }
}

TEST(MoeRouting, BadConfigurationsAreNamed) {
  Buffer logits(DType::f32, {4, 256});
  Routed r(4, 8);
  RoutingOptions o = deepseek_v3_routing(nullptr);
  o.n_group = 7;
  EXPECT_THROW(moe_routing(logits, r.idx, r.w, o), Error);
  o = deepseek_v3_routing(nullptr);
  o.topk_group = 9;
  EXPECT_THROW(moe_routing(logits, r.idx, r.w, o), Error);
  o = deepseek_v3_routing(nullptr);
  o.top_k = 200;  // 4 groups of 32 leave only 128 eligible
  EXPECT_THROW(moe_routing(logits, r.idx, r.w, o), Error);
  Buffer bias(DType::f32, {255});
  o = deepseek_v3_routing(&bias.tensor());
  try {
    moe_routing(logits, r.idx, r.w, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("correction_bias"), std::string::npos) << e.what();
  }
  Buffer wrong_idx(DType::f32, {4, 8});
  EXPECT_THROW(moe_routing(logits, wrong_idx, r.w, deepseek_v3_routing(nullptr)), Error);
}

}  // namespace
}  // namespace sol
