// The persistent sm90 GEMM's epilogue (sm90_gemm_epilogue.h) in its CPU model: D = act(alpha *
// A * B^T + beta * C + bias), bf16 or f32, against a float64 reference by DeepGEMM's metric and
// against Sol's CPU GEMM on the same inputs; C read only when beta != 0 (in place when no C is
// given); rows that are no result (contiguous padding, rows past masked_m) keep their poison;
// with split-K the epilogue runs once, on the reduced sum.
#include <gtest/gtest.h>


#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/sm90/model/sm90_gemm_persistent_model.h"
#include "kernels/cuda/sm90/sm90_gemm_plan.h"
#include "sm90_gemm_model_cases.h"
#include "sol/gemm.h"
#include "sol/tensor.h"

namespace sol::kernels::sm90 {
namespace {

using namespace model_cases;

struct Epilogue {
  float alpha = 1.0f, beta = 0.0f;
  bool separate_c = false;  // C its own tensor; else C is D's old contents (beta != 0 only)
  bool bias = false, silu = false, d_f32 = false;
};

// DeepGEMM's difference: 1 - 2 sum(xy) / sum(x^2 + y^2), in float64.
struct Diff {
  double xy = 0, sq = 0;
  void add(double x, double y) { xy += x * y, sq += x * x + y * y; }
  double value() const { return sq == 0 ? 0.0 : 1.0 - 2.0 * xy / sq; }  // NaN in, NaN out
};

// D as read back: bf16 or f32 elements, each bit pattern kept to check what was not written.
struct Output {
  bool f32 = false;
  std::vector<u16> h;
  std::vector<float> f;
  void* data() { return f32 ? static_cast<void*>(f.data()) : static_cast<void*>(h.data()); }
  double at(u64 i) const { return f32 ? double(f[i]) : double(bf16_to_f32(h[i])); }
  u32 bits(u64 i) const {
    if (!f32) return h[i];
    u32 b;
    std::memcpy(&b, &f[i], 4);
    return b;
  }
};

Output make_output(bool f32, const std::vector<float>& values) {
  Output o;
  o.f32 = f32;
  if (f32)
    o.f = values;
  else
    for (float v : values) o.h.push_back(f32_to_bf16(v));
  return o;
}

struct Result {
  double diff_reference = 0;  // against float64
  Output d;
  std::vector<float> c;  // C's values as D's dtype holds them
  std::vector<float> bias;
};

// Runs the model with epilogue `e`. D starts as NaN on the rows that are no result (they must
// keep it) and, for beta != 0 without a separate C, as C on the result rows; otherwise NaN
// everywhere, so an epilogue that reads C when beta == 0 turns the result into NaN.
template <class Plan>
Result run_epilogue(Case& c, const Epilogue& e, u32 ctas, u32 seed) {
  using Scheduler = GemmTileScheduler<Plan::block_m, Plan::block_n, 2>;
  const u64 size = u64(c.rows) * c.p.n;
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  Result r;
  const float nan = std::nanf("");
  r.c.resize(size);
  for (float& x : r.c) x = e.d_f32 ? dist(rng) : bf16_to_f32(f32_to_bf16(dist(rng)));
  for (u32 col = 0; col < c.p.n; ++col) r.bias.push_back(dist(rng));
  std::vector<float> initial(size, nan);
  const bool in_place = e.beta != 0.0f && !e.separate_c;
  for (u32 row = 0; row < c.rows; ++row)
    if (in_place && group_of(c, row) >= 0)
      std::copy_n(&r.c[u64(row) * c.p.n], c.p.n, &initial[u64(row) * c.p.n]);
  r.d = make_output(e.d_f32, initial);
  const Output poison = r.d;
  // A separate C is NaN when beta == 0: never read.
  Output separate = make_output(e.d_f32, e.beta != 0.0f ? r.c : std::vector<float>(size, nan));
  std::vector<float> workspace(c.p.split_k > 1 ? u64(c.p.split_k) * size : 0, nan);
  model::GemmOutput out;
  out.epilogue.d = r.d.data();
  out.epilogue.c = e.separate_c ? separate.data() : r.d.data();
  out.epilogue.bias = e.bias ? r.bias.data() : nullptr;
  out.epilogue.alpha = e.alpha;
  out.epilogue.beta = e.beta;
  out.epilogue.d_f32 = e.d_f32;
  out.epilogue.silu = e.silu;
  out.workspace = workspace.empty() ? nullptr : workspace.data();
  out.rows = c.rows;
  std::vector<u32> writes(size, 0);
  out.writes = &writes;
  const bool scaled = !c.sa.empty();
  model::gemm_persistent_model<Plan, Scheduler>(c.a.bytes.data(), c.b.bytes.data(), c.p, c.k, out, ctas, seed,
                                                scaled ? c.sa.data() : nullptr, scaled ? c.sb.data() : nullptr);
  Diff diff;
  u32 wrong_writes = 0;
  for (u32 row = 0; row < c.rows; ++row) {
    const int g = group_of(c, row);
    for (u32 col = 0; col < c.p.n; ++col) {
      const u64 i = u64(row) * c.p.n + col;
      wrong_writes += writes[i] != (g < 0 ? 0u : 1u);  // each result once, by TMA or from registers
      if (g < 0) {
        EXPECT_EQ(r.d.bits(i), poison.bits(i)) << "row " << row << " is no result but was written";
        continue;
      }
      double v = double(e.alpha) * reference_sum(c, row, g, col);
      if (e.beta != 0.0f) v += double(e.beta) * r.c[i];
      if (e.bias) v += r.bias[col];
      if (e.silu) v = v / (1.0 + std::exp(-v));
      diff.add(r.d.at(i), v);
    }
  }
  EXPECT_EQ(wrong_writes, 0u) << "elements of D not written exactly once (results) or never (the rest)";
  r.diff_reference = diff.value();
  return r;
}

// The same GEMM by Sol's CPU path (sol::gemm, layout nt), compared with the model's D.
double diff_against_cpu(const Case& c, const Epilogue& e, const Result& r) {
  const DType in = c.sa.empty() ? DType::bf16 : DType::f8e4m3;  // the fp8 cases are block-scaled
  const int64_t m = c.rows, n = c.p.n, k = c.k;
  Tensor a(const_cast<u8*>(c.a.bytes.data()), in, {m, k}), b(const_cast<u8*>(c.b.bytes.data()), in, {n, k});
  Output d = make_output(e.d_f32, r.c);  // C in place when beta != 0
  Tensor td(d.data(), e.d_f32 ? DType::f32 : DType::bf16, {m, n});
  std::vector<float> bias = r.bias, sa = c.sa, sb = c.sb;
  Tensor tbias(bias.data(), DType::f32, {n});
  const int64_t kb = k / 128, nb = (n + 127) / 128;
  Tensor tsa(sa.data(), DType::f32, {m, kb}), tsb(sb.data(), DType::f32, {nb, kb});
  GemmOptions opt;
  opt.layout = Layout::nt;
  opt.alpha = e.alpha;
  opt.beta = e.beta;
  opt.bias = e.bias ? &tbias : nullptr;
  opt.activation = e.silu ? Activation::silu : Activation::none;
  if (!c.sa.empty()) opt.a_scales = &tsa, opt.b_scales = &tsb;
  gemm(a, b, td, opt);
  Diff diff;
  for (u64 i = 0; i < u64(m) * n; ++i) diff.add(r.d.at(i), d.at(i));
  return diff.value();
}

using Bf16Plan64 = GemmTilePlan<64, 64, 2, 1, 2>;
using Bf16Plan128 = GemmTilePlan<128, 128, 3, 2, 2>;
using E4m3Plan = GemmTilePlan<128, 128, 4, 2, 1>;

// DeepGEMM's bounds (issue 23): 1e-5 for bf16 inputs, 1e-3 for fp8; f32 D carries no rounding of
// D, so its bound is far tighter.
double bound(const Epilogue& e, bool fp8) { return e.d_f32 ? 1e-9 : fp8 ? 1e-3 : 1e-5; }

const Epilogue kEpilogues[] = {
    {},                                                            // plain
    {0.5f, 0.0f, false, false, false, false},                      // alpha
    {-1.5f, 0.75f, true, false, false, false},                     // alpha, beta with C
    {1.0f, 1.0f, false, false, false, false},                      // residual add in place
    {1.0f, 0.0f, false, true, false, false},                       // bias
    {2.0f, 0.5f, true, true, true, false},                         // everything
    {1.0f, 0.0f, false, false, false, true},                       // f32 D
    {0.25f, -2.0f, true, true, true, true},                        // f32 D, everything
    {1.0f, 1.0f, false, true, true, true},                         // f32 D, in place
};

std::string describe(const Epilogue& e) {
  return "alpha " + std::to_string(e.alpha) + " beta " + std::to_string(e.beta) + (e.separate_c ? " c" : "") +
         (e.bias ? " bias" : "") + (e.silu ? " silu" : "") + (e.d_f32 ? " f32" : " bf16");
}

TEST(Sm90GemmEpilogueModel, OneGemmMatchesFloat64AndTheCpuGemm) {
  for (const Epilogue& e : kEpilogues) {
    Case c = make_case<Bf16Plan64>(GemmGrouping::single, 77, 136, 320, {}, 1, false, 31);
    const Result r = run_epilogue<Bf16Plan64>(c, e, 3, 41);
    EXPECT_LT(r.diff_reference, bound(e, false)) << describe(e);
    EXPECT_LT(diff_against_cpu(c, e, r), bound(e, false)) << describe(e);
  }
}

TEST(Sm90GemmEpilogueModel, BlockScaledFp8MatchesFloat64AndTheCpuGemm) {
  for (const Epilogue& e : {kEpilogues[2], kEpilogues[5], kEpilogues[7]}) {
    Case c = make_case<E4m3Plan>(GemmGrouping::single, 130, 264, 512, {}, 1, true, 32);
    const Result r = run_epilogue<E4m3Plan>(c, e, 2, 42);
    EXPECT_LT(r.diff_reference, bound(e, true)) << describe(e);
    EXPECT_LT(diff_against_cpu(c, e, r), bound(e, true)) << describe(e);
  }
}

// Split-K: the tiles write raw f32 partials and the reduction applies the epilogue once (an
// epilogue per split would add bias and C split_k times, and silu would not distribute).
TEST(Sm90GemmEpilogueModel, SplitKAppliesTheEpilogueOnceAfterTheSum) {
  for (const Epilogue& e : {kEpilogues[5], kEpilogues[7], kEpilogues[8]}) {
    Case c = make_case<Bf16Plan64>(GemmGrouping::single, 65, 72, 1024, {}, 3, false, 33);
    const Result r = run_epilogue<Bf16Plan64>(c, e, 4, 43);
    EXPECT_LT(r.diff_reference, bound(e, false)) << describe(e);
    EXPECT_LT(diff_against_cpu(c, e, r), bound(e, false)) << describe(e);
    Case s = make_case<E4m3Plan>(GemmGrouping::single, 130, 136, 1024, {}, 4, true, 34);
    EXPECT_LT(run_epilogue<E4m3Plan>(s, e, 5, 44).diff_reference, bound(e, true)) << describe(e);
  }
}

// The grouped GEMMs take f32 D (their only epilogue option on the CPU API); padding rows and
// rows past masked_m keep their poison in either dtype, with and without split-K.
TEST(Sm90GemmEpilogueModel, GroupedLayoutsWriteF32DOnResultRowsOnly) {
  std::vector<int> rows(384, -1);
  std::fill(rows.begin(), rows.begin() + 70, 0);
  std::fill(rows.begin() + 128, rows.begin() + 250, 2);
  rows[256] = 3;
  for (bool f32 : {false, true}) {
    Epilogue e;
    e.d_f32 = f32;
    Case c = make_case<Bf16Plan64>(GemmGrouping::contiguous, 384, 200, 256, rows, 1, false, 35);
    EXPECT_LT(run_epilogue<Bf16Plan64>(c, e, 5, 45).diff_reference, bound(e, false));
    Case s = make_case<E4m3Plan>(GemmGrouping::contiguous, 384, 200, 512, rows, 2, true, 36);
    EXPECT_LT(run_epilogue<E4m3Plan>(s, e, 3, 46).diff_reference, bound(e, true));
    Case m = make_case<Bf16Plan128>(GemmGrouping::masked, 150, 136, 192, {150, 0, 37, 1}, 1, false, 37);
    EXPECT_LT(run_epilogue<Bf16Plan128>(m, e, 3, 47).diff_reference, bound(e, false));
    Case ms = make_case<Bf16Plan64>(GemmGrouping::masked, 100, 64, 1024, {100, 3}, 2, false, 38);
    EXPECT_LT(run_epilogue<Bf16Plan64>(ms, e, 2, 48).diff_reference, bound(e, false));
  }
}

// NaN and Inf in C travel through the epilogue as the CPU's do; beta == 0 reads no C at all
// (the NaN-filled C of the plain cases above would show otherwise).
TEST(Sm90GemmEpilogueModel, NonFiniteValuesPropagate) {
  GemmEpilogueParams e;
  float c[4] = {std::nanf(""), INFINITY, -INFINITY, 1.0f}, d[4] = {};
  e.d = d;
  e.c = c;
  e.d_f32 = 1;
  e.beta = 1.0f;
  EXPECT_TRUE(std::isnan(epilogue_value(e, 1.0f, 0, 0)));
  EXPECT_EQ(epilogue_value(e, 1.0f, 1, 1), INFINITY);
  e.silu = 1;
  EXPECT_TRUE(std::isnan(epilogue_value(e, 0.0f, 2, 2)));  // -inf / (1 + inf), as the CPU's scalar silu
  EXPECT_EQ(epilogue_value(e, INFINITY, 3, 3), INFINITY);
  e.beta = 0.0f;
  EXPECT_EQ(epilogue_value(e, 0.0f, 0, 0), 0.0f);
}

}  // namespace
}  // namespace sol::kernels::sm90

namespace sol::kernels::sm90 {
namespace {

// The kernels store an identity epilogue's sums without epilogue_value: that is only right if
// epilogue_value is then the identity, bit for bit, on every f32 a sum can be (signed zeros,
// subnormals, infinities; NaN stays NaN), and if any other term makes the epilogue general.
TEST(Sm90GemmEpilogueModel, IdentityEpilogueIsTheIdentity) {
  GemmEpilogueParams e;
  ASSERT_TRUE(epilogue_is_identity(e));
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -3.5f, 1e-40f, -1e-45f, 3.4e38f, INFINITY, -INFINITY};
  uint32_t bits = 12345;
  for (int i = 0; i < 100000; ++i) {
    bits = bits * 1664525u + 1013904223u;
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
  }
  for (float x : values) {
    const float v = epilogue_value(e, x, 7, 3);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(v));
      continue;
    }
    uint32_t xb, vb;
    std::memcpy(&xb, &x, 4);
    std::memcpy(&vb, &v, 4);
    ASSERT_EQ(xb, vb) << x;
  }
  const float bias = 0.0f;
  GemmEpilogueParams g = e;
  g.alpha = 0.5f;
  EXPECT_FALSE(epilogue_is_identity(g));
  g = e, g.beta = 1.0f;
  EXPECT_FALSE(epilogue_is_identity(g));
  g = e, g.bias = &bias;
  EXPECT_FALSE(epilogue_is_identity(g));
  g = e, g.silu = 1;
  EXPECT_FALSE(epilogue_is_identity(g));
  g = e, g.d_f32 = 1;
  EXPECT_TRUE(epilogue_is_identity(g));
}

// Each launch's form (epilogue_form) picks the code its stores run: the linear code must give
// epilogue_value's bits for every epilogue without silu (alpha, beta with bf16 or f32 C, bias,
// signed zeros, NaN and infinities in the sums and operands), and only silu makes the form
// general.
TEST(Sm90GemmEpilogueModel, EachFormGivesEpilogueValuesBits) {
  std::mt19937 rng(91);
  std::vector<float> specials = {0.0f, -0.0f, 1.0f, -3.5f, 1e-40f, 3.4e38f, INFINITY, -INFINITY, NAN};
  std::uniform_real_distribution<float> uniform(-4.0f, 4.0f);
  const auto draw = [&] { return rng() % 4 == 0 ? specials[rng() % specials.size()] : uniform(rng); };
  std::vector<float> c32(64), bias(64);
  std::vector<u16> c16(64);
  for (u32 i = 0; i < 64; ++i) {
    c32[i] = draw();
    c16[i] = f32_to_bf16(draw());
    bias[i] = draw();
  }
  const auto same_bits = [](float x, float y) {
    uint32_t xb, yb;
    std::memcpy(&xb, &x, 4);
    std::memcpy(&yb, &y, 4);
    return xb == yb || (std::isnan(x) && std::isnan(y));
  };
  u32 checked = 0;
  for (int round = 0; round < 4000; ++round) {
    GemmEpilogueParams e;
    e.alpha = rng() % 3 == 0 ? 1.0f : draw();
    e.beta = rng() % 3 == 0 ? 0.0f : draw();
    e.d_f32 = rng() % 2;
    e.c = e.d_f32 ? static_cast<const void*>(c32.data()) : static_cast<const void*>(c16.data());
    e.bias = rng() % 2 ? bias.data() : nullptr;
    e.silu = rng() % 4 == 0;
    const EpilogueForm form = epilogue_form(e);
    EXPECT_EQ(form == EpilogueForm::general, e.silu != 0);
    EXPECT_EQ(form == EpilogueForm::identity, epilogue_is_identity(e));
    const float acc = draw();
    const u32 col = rng() % 64;
    const float want = epilogue_value(e, acc, col, col);
    const float got = form == EpilogueForm::identity ? epilogue_value_as<EpilogueForm::identity>(e, acc, col, col)
                      : form == EpilogueForm::linear ? epilogue_value_as<EpilogueForm::linear>(e, acc, col, col)
                                                     : epilogue_value_as<EpilogueForm::general>(e, acc, col, col);
    ASSERT_TRUE(same_bits(got, want)) << "form " << int(form) << " alpha " << e.alpha << " beta " << e.beta
                                      << " acc " << acc << ": " << got << " vs " << want;
    checked += form == EpilogueForm::linear;
  }
  EXPECT_GT(checked, 1000u);
}

}  // namespace
}  // namespace sol::kernels::sm90
