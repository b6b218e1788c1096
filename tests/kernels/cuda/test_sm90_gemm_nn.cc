// Layout nn (B stored [K, N], read MN-major) in the CPU models of the sm90 GEMM kernels: the
// one-tile and the persistent kernel's own block decomposition (B's TMA boxes, MN-major
// descriptors, the wgmma's transposed read) against a float64 reference and Sol's CPU sol::gemm
// (layout nn) by DeepGEMM's metric 1 - 2 sum(xy) / sum(x^2 + y^2), at odd M (1, 17, 127), N no
// multiple of the tile, K no multiple of the K block; D sits between poisoned guards that must
// stay untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/sm90/model/sm90_gemm_model.h"
#include "kernels/cuda/sm90/model/sm90_gemm_persistent_model.h"
#include "kernels/cuda/sm90/sm90_gemm_config.h"
#include "kernels/cuda/sm90/sm90_gemm_plan.h"
#include "kernels/cuda/sm90/sm90_gemm_scheduler.h"
#include "ops/error_message.h"
#include "sm90_gemm_model_cases.h"
#include "sol/gemm.h"
#include "sol/tensor.h"

namespace sol::kernels::sm90 {
namespace {

using model_cases::kPoison;
using model_cases::Matrix;
using model_cases::random_matrix;
using testing_errors::message_of;

constexpr u64 kGuard = 64;  // poisoned elements before and after D

struct Diff {
  double xy = 0, sq = 0;
  void add(double x, double y) { xy += x * y, sq += x * x + y * y; }
  double value() const { return sq == 0 ? 0.0 : 1.0 - 2.0 * xy / sq; }  // a NaN fails every bound
};

// A [m, k] and B [k, n] bf16, row-major as sol::gemm takes them with layout nn.
struct NnOperands {
  u32 m, n, k;
  Matrix a, b;
  NnOperands(u32 m_, u32 n_, u32 k_, u32 seed) : m(m_), n(n_), k(k_) {
    std::mt19937 rng(seed);
    a = random_matrix(m, k, 2, rng);
    b = random_matrix(k, n, 2, rng);  // k rows of n
  }
  double reference(u32 row, u32 col) const {
    double r = 0;
    for (u32 p = 0; p < k; ++p) r += a.values[u64(row) * k + p] * b.values[u64(p) * n + col];
    return r;
  }
};

// D with kGuard poisoned elements on either side; D's own elements poisoned too.
struct GuardedD {
  std::vector<u16> all;
  explicit GuardedD(u64 size) : all(size + 2 * kGuard, kPoison) {}
  u16* d() { return all.data() + kGuard; }
  bool guards_untouched() const {
    for (u64 i = 0; i < kGuard; ++i)
      if (all[i] != kPoison || all[all.size() - 1 - i] != kPoison) return false;
    return true;
  }
};

struct Scores {
  double vs_float64, vs_cpu;
};

// Sol's CPU GEMM (layout nn) on the same operands, against D: DeepGEMM's metric.
double diff_against_cpu_nn(const NnOperands& o, const u16* d, const GemmOptions& options = {},
                           const Tensor* c = nullptr) {
  Tensor a(const_cast<u8*>(o.a.bytes.data()), DType::bf16, {o.m, o.k});
  Tensor b(const_cast<u8*>(o.b.bytes.data()), DType::bf16, {o.k, o.n});
  std::vector<u16> cpu(u64(o.m) * o.n, kPoison);
  Tensor dc(cpu.data(), DType::bf16, {o.m, o.n});
  GemmOptions opt = options;
  opt.layout = Layout::nn;
  opt.c = c;
  gemm(a, b, dc, opt);
  Diff diff;
  for (u64 i = 0; i < cpu.size(); ++i) diff.add(bf16_to_f32(d[i]), bf16_to_f32(cpu[i]));
  return diff.value();
}

template <class Plan>
Scores tile_model_scores(u32 m, u32 n, u32 k, u32 seed) {
  const NnOperands o(m, n, k, seed);
  GuardedD out(u64(m) * n);
  model::gemm_tile_model<Plan>(o.a.bytes.data(), o.b.bytes.data(), out.d(), m, n, k, seed);
  EXPECT_TRUE(out.guards_untouched()) << "a store outside D";
  Diff diff;
  for (u32 i = 0; i < m; ++i)
    for (u32 j = 0; j < n; ++j) diff.add(bf16_to_f32(out.d()[u64(i) * n + j]), o.reference(i, j));
  return {diff.value(), diff_against_cpu_nn(o, out.d())};
}

using NnPlan64 = GemmTilePlan<64, 64, 2, 1, 2, OperandMajor::mn>;
using NnPlan64x256 = GemmTilePlan<64, 256, 4, 1, 2, OperandMajor::mn>;
using NnPlan128x256 = GemmTilePlan<128, 256, 3, 2, 2, OperandMajor::mn>;
using NnPlan64x128 = GemmTilePlan<64, 128, 4, 1, 2, OperandMajor::mn>;

constexpr double kBf16Bound = 1e-5;  // DeepGEMM's bound for bf16 (issue 23)

TEST(Sm90GemmNnModel, OneTileKernelEqualsFloat64AndTheCpuGemm) {
  struct Shape {
    u32 m, n, k;
  };
  // M = 1, 17, 127 and a partial second row tile; N partial in the tile and in a 64-column box
  // (72, 136, 200); K partial in the K block (200 = 3 x 64 + 8; 8 is one 16-byte row).
  for (const Shape& s : {Shape{1, 136, 200}, Shape{17, 72, 640}, Shape{127, 200, 8}, Shape{200, 264, 320}}) {
    const Scores r = tile_model_scores<GemmBf16NnPlan128x128>(s.m, s.n, s.k, s.m + s.n);
    EXPECT_LT(r.vs_float64, kBf16Bound) << s.m << "x" << s.n << "x" << s.k;
    EXPECT_LT(r.vs_cpu, kBf16Bound) << s.m << "x" << s.n << "x" << s.k;
  }
  for (u32 seed = 1; seed < 4; ++seed) {  // a 2-stage ring lapped under random schedules
    const Scores r = tile_model_scores<NnPlan64>(65, 136, 576, seed);
    EXPECT_LT(r.vs_float64, kBf16Bound);
    EXPECT_LT(r.vs_cpu, kBf16Bound);
  }
  const Scores wide = tile_model_scores<NnPlan64x256>(17, 264, 384, 9);  // four B boxes per stage
  EXPECT_LT(wide.vs_float64, kBf16Bound);
  EXPECT_LT(wide.vs_cpu, kBf16Bound);
}

// The persistent kernel: one ring across a CTA's tiles, split-K partials reduced in order, and
// the epilogue (alpha, beta with C, bias, silu) against sol::gemm with the same options.
struct Epilogue {
  float alpha = 1.0f, beta = 0.0f;  // beta != 0: C a random tensor of its own
  bool bias = false, silu = false;
};

template <class Plan>
Scores persistent_model_scores(u32 m, u32 n, u32 k, u32 split, u32 ctas, u32 seed, const Epilogue& e = {}) {
  using Scheduler = GemmTileScheduler<Plan::block_m, Plan::block_n, 2>;
  const NnOperands o(m, n, k, seed);
  std::mt19937 rng(seed + 7);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<u16> c(u64(m) * n);
  std::vector<float> bias(n);
  for (u16& x : c) x = f32_to_bf16(dist(rng));
  for (float& x : bias) x = dist(rng);
  GuardedD out(u64(m) * n);
  std::vector<float> workspace(split > 1 ? u64(split) * m * n : 0, std::nanf(""));
  GemmProblemView p;
  p.m = m;
  p.n = n;
  p.k_blocks = Plan::k_blocks(k);
  p.split_k = split;
  model::GemmOutput mo;
  mo.epilogue.d = out.d();
  mo.epilogue.c = c.data();
  mo.epilogue.bias = e.bias ? bias.data() : nullptr;
  mo.epilogue.alpha = e.alpha;
  mo.epilogue.beta = e.beta;
  mo.epilogue.silu = e.silu;
  mo.workspace = workspace.empty() ? nullptr : workspace.data();
  mo.rows = m;
  model::gemm_persistent_model<Plan, Scheduler>(o.a.bytes.data(), o.b.bytes.data(), p, k, mo, ctas, seed);
  EXPECT_TRUE(out.guards_untouched()) << "a store outside D";
  Diff diff;
  for (u32 i = 0; i < m; ++i)
    for (u32 j = 0; j < n; ++j) {
      double v = double(e.alpha) * o.reference(i, j);
      if (e.beta != 0.0f) v += double(e.beta) * bf16_to_f32(c[u64(i) * n + j]);
      if (e.bias) v += bias[j];
      if (e.silu) v = v / (1.0 + std::exp(-v));
      diff.add(bf16_to_f32(out.d()[u64(i) * n + j]), v);
    }
  GemmOptions cpu;
  cpu.alpha = e.alpha;
  cpu.beta = e.beta;
  cpu.activation = e.silu ? Activation::silu : Activation::none;
  const Tensor tbias(bias.data(), DType::f32, {n}), tc(c.data(), DType::bf16, {m, n});
  if (e.bias) cpu.bias = &tbias;
  return {diff.value(), diff_against_cpu_nn(o, out.d(), cpu, e.beta != 0.0f ? &tc : nullptr)};
}

TEST(Sm90GemmNnModel, PersistentKernelEqualsFloat64AndTheCpuGemm) {
  struct Run {
    u32 m, n, k, split, ctas;
  };
  for (const Run& r : {Run{1, 136, 704, 1, 2}, Run{17, 200, 320, 1, 3}, Run{127, 72, 1024, 3, 4}, Run{130, 264, 200, 1, 2}}) {
    const Scores s = persistent_model_scores<NnPlan64x128>(r.m, r.n, r.k, r.split, r.ctas, r.m + r.k);
    EXPECT_LT(s.vs_float64, kBf16Bound) << r.m << "x" << r.n << "x" << r.k << " split " << r.split;
    EXPECT_LT(s.vs_cpu, kBf16Bound) << r.m << "x" << r.n << "x" << r.k << " split " << r.split;
  }
  const Scores wide = persistent_model_scores<NnPlan128x256>(257, 264, 448, 1, 2, 5);
  EXPECT_LT(wide.vs_float64, kBf16Bound);
  EXPECT_LT(wide.vs_cpu, kBf16Bound);
  const Epilogue full{0.5f, 0.75f, true, true};
  for (u32 split : {1u, 2u}) {
    const Scores e = persistent_model_scores<NnPlan64x128>(77, 136, 512, split, 3, 6 + split, full);
    EXPECT_LT(e.vs_float64, kBf16Bound) << "epilogue, split " << split;
    EXPECT_LT(e.vs_cpu, kBf16Bound) << "epilogue, split " << split;
  }
}

TEST(Sm90GemmNnModel, AGroupedLayoutWithAnMnMajorBIsRefused) {
  std::vector<u8> a(64 * 64 * 2), b(64 * 64 * 2);
  std::vector<u16> d(64 * 64);
  std::vector<int> masked = {64};
  GemmProblemView p;
  p.grouping = GemmGrouping::masked;
  p.m = p.n = 64;
  p.k_blocks = 1;
  p.masked_m = masked.data();
  model::GemmOutput out;
  out.epilogue.d = d.data();
  out.rows = 64;
  EXPECT_EQ(message_of([&] {
              model::gemm_persistent_model<NnPlan64, GemmTileScheduler<64, 64>>(a.data(), b.data(), p, 64, out, 1, 0);
            }),
            "sm90 gemm: an MN-major B (layout nn) is for one GEMM");
}

// The chooser's configuration for every nn square of bench/gemm_shapes.json (and odd shapes)
// passes the same budgets with B's MN-major boxes; fp8 with an MN-major B is refused by name.
TEST(Sm90GemmNnConfig, NnShapesGetValidConfigurationsAndFp8IsRefused) {
  const Sm90Target t = Sm90Target::h200();
  for (std::int64_t s : {256, 512, 1024, 2048, 4096}) {
    GemmProblem p{{s}, s, s, GemmKernelKind::bf16, 2, OperandMajor::mn};
    Sm90GemmConfig c;
    ASSERT_EQ(message_of([&] { c = choose_config(p, t); }), "(no error)") << s;
    EXPECT_EQ(message_of([&] { check_config(c, p, t); }), "(no error)") << s;
    GemmProblem nt = p;
    nt.b_major = OperandMajor::k;
    const Sm90GemmConfig c_nt = choose_config(nt, t);  // the same model: nn costs what nt costs
    EXPECT_EQ(c.block_m, c_nt.block_m);
    EXPECT_EQ(c.block_n, c_nt.block_n);
    EXPECT_EQ(c.stages, c_nt.stages);
  }
  for (GemmProblem p : {GemmProblem{{1}, 72, 8, GemmKernelKind::bf16, 2, OperandMajor::mn},
                        GemmProblem{{127}, 200, 7168, GemmKernelKind::bf16, 4, OperandMajor::mn}}) {
    const Sm90GemmConfig c = choose_config(p, t);
    EXPECT_EQ(message_of([&] { check_config(c, p, t); }), "(no error)");
  }
  const GemmProblem fp8{{256}, 256, 256, GemmKernelKind::e4m3_block_scaled, 2, OperandMajor::mn};
  EXPECT_NE(message_of([&] { choose_config(fp8, t); }).find("fp8 wgmma reads K-major operands only"),
            std::string::npos);
}

}  // namespace
}  // namespace sol::kernels::sm90
