// The device routing math (src/kernels/cuda/route_math.cuh and device_exp_math.cuh, compiled
// here as plain C++) against the CPU path: the sigmoid bit for bit against the AVX-512 row
// kernel the CPU scores with, and whole tokens routed the way the device kernel routes them
// (route.cuh: per-expert keys, group top two, group ranks, k argmax rounds, weights summed in
// output order) against sol::moe_routing on random logits, ties, NaN and +-inf. The warp's
// shuffles only reorder exact, order-free steps (maxima of keys, an argmax over distinct
// indices), so the serial order here is the device's result.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/route_math.cuh"
#include "kernels/sigmoid.h"
#include "sol/hw.h"
#include "sol/routing.h"
#include "sol/tensor.h"

namespace sol {
namespace {

using namespace sol_cuda;

bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

TEST(CudaRouteMath, SigmoidMatchesTheAvx512RowBitForBit) {
  if (!isa_at_least(Isa::avx512)) GTEST_SKIP() << "the CPU path scores with libm's exp below AVX-512";
  std::vector<float> x;
  for (uint64_t b = 0; b <= 0xffffffffull; b += 65521) x.push_back(std::bit_cast<float>(uint32_t(b)));
  for (float v = -120.0f; v <= 120.0f; v += 0.00390625f) x.push_back(v);
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.72f, 89.0f, 89.5f, -103.9f, -104.0f, -104.5f})
    x.push_back(v);
  std::vector<float> want(x.size());
  kernels::sigmoid_row_avx512(x.data(), DType::f32, want.data(), int64_t(x.size()));
  int64_t wrong = 0;
  for (size_t i = 0; i < x.size(); ++i)
    if (!same_float(sigmoid_f32(x[i]), want[i]) && wrong++ < 5)
      ADD_FAILURE() << "x = " << x[i] << " (0x" << std::hex << std::bit_cast<uint32_t>(x[i]) << std::dec
                    << "): device " << sigmoid_f32(x[i]) << ", cpu " << want[i];
  EXPECT_EQ(wrong, 0);
}

TEST(CudaRouteMath, ScaleIsLdexpBitForBit) {
  // exp_f32's p * 2^n: every n its clamp allows, p over [0.5, 2) at a stride coprime to the
  // mantissa, the subnormal and overflowing results included.
  int64_t wrong = 0;
  for (int n = -150; n <= 128; ++n)
    for (uint32_t b = std::bit_cast<uint32_t>(0.5f); b < std::bit_cast<uint32_t>(2.0f); b += 193) {
      const float p = std::bit_cast<float>(b), want = std::ldexp(p, n);
      if (std::bit_cast<uint32_t>(scale_pow2(p, n)) != std::bit_cast<uint32_t>(want) && wrong++ < 5)
        ADD_FAILURE() << "p = " << p << ", n = " << n << ": " << scale_pow2(p, n) << ", ldexp " << want;
    }
  EXPECT_EQ(wrong, 0);
}

TEST(CudaRouteMath, ExpIsWithinThreeUlpOfTheExactValue) {
  // Softmax's exponential (its sum order differs from the CPU's, so it promises accuracy only).
  // Normal results: the polynomial's worst case sampled here is ~2.1 ulp.
  double worst = 0;
  for (float v = -87.0f; v <= 88.0f; v += 0.0009765625f) {
    const double want = std::exp(double(v));
    const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
    worst = std::max(worst, std::fabs(double(exp_f32(v)) - want) / ulp);
  }
  EXPECT_LE(worst, 3.0);
  EXPECT_EQ(std::bit_cast<uint32_t>(exp_f32(-INFINITY)), 0u);  // masked entries get exactly 0
  EXPECT_TRUE(std::isinf(exp_f32(INFINITY)));
  EXPECT_TRUE(std::isnan(exp_f32(NAN)));
}

TEST(CudaRouteMath, KeysOrderLikeTheRanking) {
  const float v[] = {-INFINITY, -3.5f, -1e-30f, 0.0f, 1e-30f, 0.25f, 1.0f, 7.0f, INFINITY};
  for (size_t i = 0; i + 1 < sizeof v / sizeof v[0]; ++i) EXPECT_LT(route_key(v[i]), route_key(v[i + 1]));
  EXPECT_LT(route_key(NAN), route_key(-INFINITY));
  EXPECT_GT(route_key(NAN), kRouteNotEligible);
  for (float f : v) EXPECT_TRUE(same_float(route_key_score(route_key(f)), f));
  EXPECT_TRUE(std::isnan(route_key_score(kRouteNanKey)));
  RouteTop2 t = route_top2_empty();
  for (int k : {5, -2, 9, 9, 1}) t = route_top2_add(t, k);
  EXPECT_EQ(t.h, 9);
  EXPECT_EQ(t.l, 9);
  const RouteTop2 m = route_top2_merge({7, 3}, {6, 4});
  EXPECT_EQ(m.h, 7);
  EXPECT_EQ(m.l, 6);
}

// One token as route.cuh routes it, its steps in serial order.
void route_like_device(const float* logits, const float* bias, int e, const RoutingOptions& o, int32_t* idx,
                       float* w) {
  std::vector<float> score(static_cast<size_t>(e), 0.0f);
  std::vector<int> key(static_cast<size_t>(e));
  for (int i = 0; i < e; ++i) {
    score[size_t(i)] = sigmoid_f32(logits[i]);
    key[size_t(i)] = route_key(bias ? score[size_t(i)] + bias[i] : score[size_t(i)]);
  }
  if (o.n_group > 1) {
    const int groups = int(o.n_group), per = e / groups;
    std::vector<int> gk(static_cast<size_t>(groups));
    for (int g = 0; g < groups; ++g) {
      RouteTop2 t = route_top2_empty();
      for (int i = g * per; i < (g + 1) * per; ++i) t = route_top2_add(t, key[size_t(i)]);
      gk[size_t(g)] = route_group_key(t, true);
    }
    for (int g = 0; g < groups; ++g) {
      int rank = 0;
      for (int h = 0; h < groups; ++h) rank += h != g && route_before(gk[size_t(h)], h, gk[size_t(g)], g);
      if (rank >= o.topk_group)
        for (int i = g * per; i < (g + 1) * per; ++i) key[size_t(i)] = kRouteNotEligible;
    }
  }
  float sum = 0;
  for (int r = 0; r < o.top_k; ++r) {
    int bk = kRouteNotEligible, bi = 0x7FFFFFFF;
    for (int i = 0; i < e; ++i)
      if (key[size_t(i)] != kRouteNotEligible && route_before(key[size_t(i)], i, bk, bi)) bk = key[size_t(i)], bi = i;
    key[size_t(bi)] = kRouteNotEligible;
    idx[r] = bi;
    w[r] = score[size_t(bi)];
    sum += w[r];
  }
  const float factor = route_factor(sum, o.renormalize, o.scaling);
  for (int r = 0; r < o.top_k; ++r) w[r] *= factor;
}

struct Shape {
  int e, n_group, topk_group, k;
  bool renormalize;
};

void check_against_cpu(const Shape& s, int tokens, int kind, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(tokens * s.e)), bias(static_cast<size_t>(s.e));
  for (auto& b : bias) b = kind == 1 ? 0.125f * float(rng() % 3) : normal(rng) * 0.1f;
  for (size_t i = 0; i < logits.size(); ++i) {
    float v = normal(rng);
    if (kind == 1) v = float(int(rng() % 5) - 2);  // few distinct values: ties everywhere
    if (kind == 2 && rng() % 17 == 0) v = NAN;
    if (kind == 2 && rng() % 23 == 0) v = rng() % 2 ? INFINITY : -INFINITY;
    if (kind == 3) v *= 60.0f;  // saturated sigmoids: many scores exactly 0 or 1
    logits[i] = v;
  }
  Tensor lt(logits.data(), DType::f32, {tokens, s.e}), bt(bias.data(), DType::f32, {s.e});
  RoutingOptions o;
  o.top_k = s.k, o.n_group = s.n_group, o.topk_group = s.topk_group, o.renormalize = s.renormalize;
  o.scaling = 2.5f, o.correction_bias = &bt;
  std::vector<int32_t> idx(static_cast<size_t>(tokens * s.k), -7);
  std::vector<float> w(idx.size(), NAN);
  moe_routing(lt, Tensor(idx.data(), DType::i32, {tokens, s.k}), Tensor(w.data(), DType::f32, {tokens, s.k}), o);
  std::vector<int32_t> di(static_cast<size_t>(s.k));
  std::vector<float> dw(static_cast<size_t>(s.k));
  int wrong = 0;
  for (int t = 0; t < tokens; ++t) {
    route_like_device(&logits[size_t(t) * size_t(s.e)], bias.data(), s.e, o, di.data(), dw.data());
    for (int j = 0; j < s.k; ++j) {
      const size_t at = size_t(t) * size_t(s.k) + size_t(j);
      if ((di[size_t(j)] != idx[at] || !same_float(dw[size_t(j)], w[at])) && wrong++ < 3)
        ADD_FAILURE() << "e " << s.e << " groups " << s.n_group << " k " << s.k << " kind " << kind << " token " << t
                      << " choice " << j << ": device " << di[size_t(j)] << " " << dw[size_t(j)] << ", cpu " << idx[at]
                      << " " << w[at];
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(CudaRouteMath, TokensRoutedLikeTheCpuPath) {
  const Shape shapes[] = {{256, 8, 4, 8, true}, {256, 1, 1, 8, true}, {64, 4, 2, 6, false},
                          {96, 3, 2, 5, true},  {32, 16, 3, 4, true}, {160, 32, 32, 32, true},
                          {7, 1, 1, 3, true}};
  uint64_t seed = 1;
  for (const Shape& s : shapes)
    for (int kind = 0; kind < 4; ++kind) check_against_cpu(s, 97, kind, seed++);
}

}  // namespace
}  // namespace sol
