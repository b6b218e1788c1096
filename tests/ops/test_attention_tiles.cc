// Flash attention's AVX2 tile products against the plain ones: the same bits (the AVX2 tiles
// exist to give the scalar path's results at vector speed), for every row count, column tail,
// K length and the accumulate / row_scale ends, with poisoned C beyond the written columns.
// The AVX-512 FMA tile (bf16 products as f32 FMAs, A rows widened) against its own FMA chain,
// bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "sol/dtype.h"
#include "sol/hw.h"

namespace sol {
namespace {

using kernels::AttnGemmTile;
using kernels::kAttnPanel;
using kernels::kAttnTileRows;

// One tile case: A (m rows, lda apart) and a B panel of k_steps steps, as f32 and as bf16 (and
// A's bf16 values widened to f32 rows, as the FMA tile reads them);
// C's start (ldc apart, -7 past the first n columns, which no tile may write); row scales,
// applied on odd m when accumulating.
struct TileCase {
  int m, n;
  int64_t k_steps;
  bool accumulate;
  int64_t lda, ldc;
  std::vector<float> a32, b32, row_scale, start, a_widened;
  std::vector<uint16_t> a16, b16;

  TileCase(std::mt19937& rng, int m_, int n_, int64_t k_steps_, bool accumulate_)
      : m(m_), n(n_), k_steps(k_steps_), accumulate(accumulate_), lda(2 * k_steps_ + 3), ldc(kAttnPanel + 5) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    a32.resize(size_t(m * lda));
    b32.resize(size_t(k_steps * kAttnPanel * 2 + 1));
    a16.resize(a32.size());
    b16.resize(b32.size());
    for (size_t i = 0; i < a32.size(); ++i) a16[i] = f32_to_bf16(a32[i] = normal(rng));
    for (uint16_t h : a16) a_widened.push_back(bf16_to_f32(h));
    for (size_t i = 0; i < b32.size(); ++i) b16[i] = f32_to_bf16(b32[i] = normal(rng));
    row_scale.resize(size_t(m));
    start.assign(size_t(m * ldc), -7.0f);
    for (int i = 0; i < m; ++i) {
      row_scale[size_t(i)] = normal(rng);
      for (int j = 0; j < n; ++j) start[size_t(i * ldc + j)] = normal(rng);
    }
  }
  const float* scales() const { return accumulate && m % 2 ? row_scale.data() : nullptr; }
  AttnGemmTile tile(bool bf16, float* c, bool widened = false) const {
    AttnGemmTile t;
    t.m = m;
    t.n = n;
    t.k_steps = k_steps;
    t.a = widened ? a_widened.data() : bf16 ? static_cast<const void*>(a16.data()) : a32.data();
    t.lda = lda;
    t.b = bf16 ? static_cast<const void*>(b16.data()) : b32.data();
    t.c = c;
    t.ldc = ldc;
    t.accumulate = accumulate;
    t.row_scale = scales();
    return t;
  }
  std::string describe() const {
    return "k_steps=" + std::to_string(k_steps) + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
           " accumulate=" + std::to_string(accumulate);
  }
};

TEST(AttentionTiles, Avx2F32GivesTheScalarBits) {
  if (!isa_at_least(Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(7);
  for (int64_t k_steps : {0, 1, 3, 32, 77})
    for (int m = 1; m <= kAttnTileRows; ++m)
      for (int n : {1, 7, 8, 17, 32})
        for (bool accumulate : {false, true}) {
          const TileCase c(rng, m, n, k_steps, accumulate);
          std::vector<float> want = c.start, got = c.start;
          kernels::attn_gemm_tile_f32_scalar(c.tile(false, want.data()));
          kernels::attn_gemm_tile_f32_avx2(c.tile(false, got.data()));
          ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << c.describe();
        }
}

// The output rows (acc * row_scale * scale, as f32 or bf16) at avx2: the scalar bits, every
// column tail, nothing past a row.
TEST(AttentionTiles, Avx2StoreRowsGiveTheScalarBits) {
  if (!isa_at_least(Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (bool bf16 : {false, true})
    for (int64_t n : {1, 7, 8, 9, 17, 128, 131}) {
      constexpr int64_t m = 3;
      const int64_t lda = n + 5, ldo = n + 3;
      std::vector<float> acc(size_t(m * lda)), scale(m);
      for (float& x : acc) x = normal(rng);
      for (float& x : scale) x = 1.0f / (1.0f + std::fabs(normal(rng)));
      std::vector<uint8_t> want(size_t(m * ldo * 4), 0xAB), got = want;
      kernels::AttnStoreRows r;
      r.m = m;
      r.n = n;
      r.acc = acc.data();
      r.lda = lda;
      r.row_scale = n % 2 ? scale.data() : nullptr;
      r.scale = 0.37f;
      r.ldo = ldo;
      r.bf16 = bf16;
      r.out = want.data();
      kernels::attn_store_rows_scalar(r);
      r.out = got.data();
      kernels::attn_store_rows_avx2(r);
      ASSERT_EQ(want, got) << (bf16 ? "bf16" : "f32") << " n=" << n;
    }
}

// The FMA variant's bf16 tile (A rows widened to f32), at avx2 and at avx512, is
// acc = fma(a1, b1, fma(a0, b0, acc)) per K pair, in K order, then c * row_scale + acc in one
// rounding when accumulating: a scalar model of that chain (std::fma) gives its bits for every
// row count, column tail and K, columns past n untouched.
TEST(AttentionTiles, FmaTileIsItsFmaChain) {
  if (!isa_at_least(Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<void (*)(const kernels::AttnGemmTile&)> tiles = {kernels::attn_gemm_tile_bf16_widened_avx2};
  if (isa_at_least(Isa::avx512)) tiles.push_back(kernels::attn_gemm_tile_bf16_widened_avx512);
  std::mt19937 rng(11);
  const auto widen = [](uint16_t h) {
    const uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  for (int64_t k_steps : {0, 1, 3, 32, 77})
    for (int m = 1; m <= kAttnTileRows; ++m)
      for (int n : {1, 15, 16, 17, 32})
        for (bool accumulate : {false, true}) {
          const TileCase c(rng, m, n, k_steps, accumulate);
          std::vector<float> want = c.start;
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              float acc = 0.0f;
              for (int64_t k = 0; k < k_steps; ++k) {
                const uint16_t* pair = &c.a16[size_t(i * c.lda + 2 * k)];
                const uint16_t* col = &c.b16[size_t((k * kAttnPanel + j) * 2)];
                acc = std::fma(widen(pair[1]), widen(col[1]), std::fma(widen(pair[0]), widen(col[0]), acc));
              }
              float& out = want[size_t(i * c.ldc + j)];
              out = accumulate ? std::fma(out, c.scales() ? c.row_scale[size_t(i)] : 1.0f, acc) : acc;
            }
          for (size_t level = 0; level < tiles.size(); ++level) {
            std::vector<float> got = c.start;
            tiles[level](c.tile(true, got.data(), true));
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
                << (level ? "avx512 " : "avx2 ") << c.describe();
          }
        }
}

// The widened A rows of the FMA variant hold exactly the bf16 values the pair layout holds: the
// row primitives' widened P and dS are the f32 of their bf16 outputs (same sums and factors),
// and the gather widens every element of every row, tails included, nothing past a row.
TEST(AttentionTiles, WidenedRowsAreTheBf16RowsWidened) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  constexpr int m = 5, n = 48;
  constexpr int64_t ld = n + 16;
  std::vector<float> s(size_t(m * ld)), dp(size_t(m * ld)), lse(n), delta(n);
  for (float& x : s) x = normal(rng);
  for (float& x : dp) x = normal(rng);
  for (int j = 0; j < n; ++j) lse[size_t(j)] = 2.0f + normal(rng), delta[size_t(j)] = normal(rng);
  const int lo[m] = {0, 3, 17, 0, 40}, hi[m] = {48, 30, 17, 1, 48};
  using Softmax = void (*)(const kernels::AttnSoftmaxRows&);
  using Grad = void (*)(const kernels::AttnGradRows&);
  std::vector<std::pair<Softmax, Grad>> levels = {{kernels::attn_softmax_rows_scalar, kernels::attn_grad_rows_scalar}};
  if (isa_at_least(Isa::avx2)) levels.push_back({kernels::attn_softmax_rows_avx2, kernels::attn_grad_rows_avx2});
  if (isa_at_least(Isa::avx512)) levels.push_back({kernels::attn_softmax_rows_avx512, kernels::attn_grad_rows_avx512});
  for (auto [softmax, grad] : levels) {
    std::vector<uint16_t> p16(size_t(m * ld), 0xffff), ds16(size_t(m * ld), 0xffff);
    std::vector<float> pw(size_t(m * ld), -9.0f), dsw(size_t(m * ld), -9.0f);
    float max16[m], sum16[m], alpha16[m], maxw[m], sumw[m], alphaw[m];
    for (int i = 0; i < m; ++i) max16[i] = maxw[i] = i == 1 ? 0.5f : -INFINITY, sum16[i] = sumw[i] = i == 1 ? 2.0f : 0.0f;
    for (bool widened : {false, true}) {
      kernels::AttnSoftmaxRows r;
      r.m = m;
      r.n = n;
      r.s = s.data();
      r.lds = ld;
      r.lo = lo;
      r.hi = hi;
      r.scale = 0.3f;
      r.row_max = widened ? maxw : max16;
      r.row_sum = widened ? sumw : sum16;
      r.alpha = widened ? alphaw : alpha16;
      r.p = widened ? static_cast<void*>(pw.data()) : p16.data();
      r.ldp = ld;
      r.p_bf16 = true;
      r.p_widened = widened;
      softmax(r);
      kernels::AttnGradRows g;
      g.m = m;
      g.n = n;
      g.s = s.data();
      g.dp = dp.data();
      g.ld = ld;
      g.lo = lo;
      g.hi = hi;
      g.scale = 0.3f;
      g.lse = lse.data();
      g.delta = delta.data();
      g.per_column = true;
      g.ds = widened ? static_cast<void*>(dsw.data()) : ds16.data();
      g.ldo = ld;
      g.out_bf16 = true;
      g.out_widened = widened;
      grad(g);
    }
    for (int i = 0; i < m; ++i) {
      EXPECT_EQ(std::memcmp(&max16[i], &maxw[i], 4), 0) << i;
      EXPECT_EQ(std::memcmp(&sum16[i], &sumw[i], 4), 0) << i;
      EXPECT_EQ(std::memcmp(&alpha16[i], &alphaw[i], 4), 0) << i;
      for (int j = 0; j < ld; ++j) {
        const size_t at = size_t(i * ld + j);
        if (j >= n) {  // past the row: untouched
          EXPECT_EQ(pw[at], -9.0f);
          EXPECT_EQ(dsw[at], -9.0f);
          continue;
        }
        const float want_p = bf16_to_f32(p16[at]), want_ds = bf16_to_f32(ds16[at]);
        EXPECT_EQ(std::memcmp(&want_p, &pw[at], 4), 0) << "P " << i << "," << j;
        EXPECT_EQ(std::memcmp(&want_ds, &dsw[at], 4), 0) << "dS " << i << "," << j;
      }
    }
  }
  using Gather = void (*)(const void*, int64_t, int64_t, int64_t, float*);
  std::vector<Gather> gathers;
  if (isa_at_least(Isa::avx2)) gathers.push_back(kernels::attn_gather_widened_avx2);
  if (isa_at_least(Isa::avx512)) gathers.push_back(kernels::attn_gather_widened_avx512);
  for (Gather gather : gathers)
  for (int64_t cols : {1, 15, 16, 17, 128, 131}) {
    const int64_t rows = 3, stride = cols + 9;
    std::vector<uint16_t> src(size_t(rows * stride));
    for (uint16_t& h : src) h = f32_to_bf16(normal(rng));
    std::vector<float> dst(size_t(rows * cols + 16), -9.0f);
    gather(src.data(), stride * 2, rows, cols, dst.data());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t c = 0; c < cols; ++c) {
        const float want = bf16_to_f32(src[size_t(i * stride + c)]);
        ASSERT_EQ(std::memcmp(&want, &dst[size_t(i * cols + c)], 4), 0) << cols << " " << i << "," << c;
      }
    for (size_t x = size_t(rows * cols); x < dst.size(); ++x) ASSERT_EQ(dst[x], -9.0f) << cols;
  }
}

}  // namespace
}  // namespace sol
