// The avx2 level's two bf16 GEMM tiles: gemm_tile_bf16_fma_avx2 reads A packed once as f32
// pairs (pack_a_panel_f32_pairs_avx2), gemm_tile_bf16_avx2 reads bf16 pairs and widens them in
// registers. They sum the same products in the same order, so on the same operands they give
// the same bits: every row count of a panel (1..12, the widened panel holds exactly m rows),
// ragged columns, an odd last step, running partial sums between K blocks, the full epilogue,
// and fp8 block scales with B as bf16 or as e4m3 widened in the kernel. A double reference
// guards against both being wrong alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "kernels/gemm.h"
#include "sol/dtype.h"
#include "sol/hw.h"

namespace sol::kernels {
namespace {

struct Operands {
  int m, n;
  int64_t steps;
  std::vector<uint16_t> a;       // m rows of 2 * steps bf16
  std::vector<uint32_t> b;       // steps x kGemmNR bf16 pairs (a bf16 B panel)
  std::vector<uint8_t> b_fp8;    // the same panel as e4m3 pairs (64 bytes a step)
  std::vector<float> sa, sb;     // fp8 block scales: m x groups, groups
};

Operands make(int m, int n, int64_t steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Operands o{m, n, steps, {}, {}, {}, {}, {}};
  const auto bf16 = [&] {
    // Either sign, exponents over a few binades: products and sums stay normal.
    return uint16_t(((0x7C + rng() % 7) << 7) | (rng() & 0x7F) | (rng() & 1) << 15);
  };
  o.a.resize(size_t(m) * 2 * steps);
  for (auto& v : o.a) v = bf16();
  o.b.resize(size_t(steps) * kGemmNR);
  o.b_fp8.resize(size_t(steps) * kGemmNR * 2);
  for (int64_t s = 0; s < steps; ++s)
    for (int c = 0; c < kGemmNR; ++c)
      for (int h = 0; h < 2; ++h) {
        // e4m3 codes without NaN, widened exactly to bf16 for the bf16 panel.
        const uint8_t code = c < n ? uint8_t(rng() % 0x7F) | uint8_t(rng() & 0x80) : 0;
        o.b_fp8[size_t(s * kGemmNR + c) * 2 + h] = code;
        const uint16_t w = f32_to_bf16(e4m3_to_f32(code));
        o.b[size_t(s * kGemmNR + c)] |= uint32_t(w) << (16 * h);
      }
  const int64_t groups = steps / kScaleGroupSteps;
  o.sa.resize(size_t(m * groups));
  o.sb.resize(size_t(groups));
  for (auto& v : o.sa) v = float(1 + rng() % 9) / 64;
  for (auto& v : o.sb) v = float(1 + rng() % 9) / 32;
  return o;
}

// Row pointers of the panel's rows at step `first_step` (a short panel repeats its last row,
// as the driver's row_pointers does for the bf16-pair panel).
void rows_at(const Operands& o, int64_t first_step, const void* (&rows)[kGemmMR]) {
  for (int i = 0; i < kGemmMR; ++i)
    rows[i] = o.a.data() + size_t(std::min(i, o.m - 1)) * 2 * o.steps + 2 * first_step;
}

enum class Mode { plain, two_blocks, scaled, scaled_fp8 };

// D (f32, m x kGemmNR, row stride kGemmNR) from one of the two tiles.
std::vector<float> run(const Operands& o, bool widened, Mode mode) {
  const void* rows[kGemmMR];
  rows_at(o, 0, rows);
  std::vector<uint32_t> panel(size_t(o.steps) * 2 * kGemmMR + 64, 0xDEADBEEFu);
  if (widened) pack_a_panel_f32_pairs_avx2(rows, o.m, o.steps, 0, false, panel.data());
  else pack_a_panel_avx2(rows, o.steps, 0, false, panel.data());
  std::vector<float> d(size_t(o.m) * kGemmNR, std::nanf("")), partial(size_t(o.m) * kGemmNR, std::nanf(""));
  std::vector<float> c(size_t(o.m) * kGemmNR), bias(kGemmNR);
  for (size_t i = 0; i < c.size(); ++i) c[i] = float(int(i % 13) - 6) / 8;
  for (int j = 0; j < kGemmNR; ++j) bias[size_t(j)] = float(j % 5 - 2) / 4;
  GemmEpilogue e;
  e.d = d.data();
  e.ldd = kGemmNR;
  GemmTile t;
  t.m = o.m;
  t.n = o.n;
  t.a = panel.data();
  t.b = o.b.data();
  t.partial = partial.data();
  t.ldp = kGemmNR;
  const auto tile = widened ? gemm_tile_bf16_fma_avx2 : gemm_tile_bf16_avx2;
  if (mode == Mode::two_blocks) {
    // Steps [0, s1) into the partial sums, then [s1, steps) through the whole epilogue.
    e.alpha = 0.5f;
    e.beta = 0.75f;
    e.c = c.data();
    e.ldc = kGemmNR;
    e.bias = bias.data();
    e.silu = true;
    const int64_t s1 = o.steps / 2 + 1;
    t.k_steps = s1;
    t.first = true;
    t.last = nullptr;
    tile(t);
    t.k_steps = o.steps - s1;
    t.a = panel.data() + (widened ? s1 * 2 * o.m : s1 * kGemmMR);
    t.b = o.b.data() + s1 * kGemmNR;
    t.first = false;
    t.last = &e;
    tile(t);
    return d;
  }
  t.k_steps = o.steps;
  t.first = true;
  t.last = &e;
  if (mode == Mode::scaled || mode == Mode::scaled_fp8) {
    t.sa = o.sa.data();
    t.lds_a = o.steps / kScaleGroupSteps;
    t.sb = o.sb.data();
    if (mode == Mode::scaled_fp8) {
      t.b = o.b_fp8.data();
      t.b_fp8 = true;
    }
  }
  tile(t);
  return d;
}

// sum over steps of a[i][2s] b[s][j].lo + a[i][2s+1] b[s][j].hi in double, and the sum of the
// products' magnitudes (what an f32 sum's rounding error scales with).
std::pair<double, double> reference(const Operands& o, int i, int j) {
  double sum = 0, magnitude = 0;
  for (int64_t s = 0; s < o.steps; ++s) {
    const uint32_t w = o.b[size_t(s * kGemmNR + j)];
    for (int h = 0; h < 2; ++h) {
      const double x = double(bf16_to_f32(o.a[size_t(i) * 2 * o.steps + 2 * s + h])) * bf16_to_f32(uint16_t(w >> (16 * h)));
      sum += x;
      magnitude += std::fabs(x);
    }
  }
  return {sum, magnitude};
}

void expect_same(const Operands& o, Mode mode, const char* what) {
  const std::vector<float> pairs = run(o, false, mode), widened = run(o, true, mode);
  SCOPED_TRACE(std::string(what) + " m=" + std::to_string(o.m) + " n=" + std::to_string(o.n) +
               " steps=" + std::to_string(o.steps));
  int wrong = 0;
  for (int i = 0; i < o.m; ++i)
    for (int j = 0; j < o.n; ++j) {
      const size_t at = size_t(i) * kGemmNR + j;
      uint32_t x, y;
      std::memcpy(&x, &pairs[at], 4);
      std::memcpy(&y, &widened[at], 4);
      if (x != y && wrong++ < 3) ADD_FAILURE() << "(" << i << ", " << j << "): pairs " << pairs[at] << ", widened " << widened[at];
      if (mode == Mode::plain) {
        const auto [ref, magnitude] = reference(o, i, j);
        EXPECT_NEAR(widened[at], ref, 1e-5 * magnitude + 1e-30) << "(" << i << ", " << j << ")";
      }
    }
  // Columns past n are not written.
  for (int i = 0; i < o.m; ++i)
    for (int j = o.n; j < kGemmNR; ++j) EXPECT_TRUE(std::isnan(widened[size_t(i) * kGemmNR + j]));
  EXPECT_EQ(wrong, 0);
}

class GemmAvx2Widened : public testing::Test {
 protected:
  void SetUp() override {
    if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no AVX2";
  }
};

TEST_F(GemmAvx2Widened, EveryPanelHeightAndRaggedColumns) {
  uint64_t seed = 1;
  for (int m = 1; m <= kGemmMR; ++m)
    for (int n : {1, 9, 17, 32})
      for (int64_t steps : {int64_t(1), int64_t(7), int64_t(131), int64_t(300)})
        expect_same(make(m, n, steps, seed++), Mode::plain, "plain");
}

TEST_F(GemmAvx2Widened, PartialSumsAndTheWholeEpilogue) {
  uint64_t seed = 100;
  for (int m : {1, 5, 6, 7, 12})
    for (int64_t steps : {int64_t(3), int64_t(260)}) expect_same(make(m, 23, steps, seed++), Mode::two_blocks, "two K blocks");
}

TEST_F(GemmAvx2Widened, Fp8BlockScales) {
  uint64_t seed = 200;
  for (int m : {1, 4, 6, 11, 12})
    for (int64_t groups : {1, 3}) {
      const Operands o = make(m, m == 11 ? 30 : 32, groups * kScaleGroupSteps, seed++);
      expect_same(o, Mode::scaled, "scaled, bf16 B");
      expect_same(o, Mode::scaled_fp8, "scaled, e4m3 B");
    }
}

}  // namespace
}  // namespace sol::kernels
