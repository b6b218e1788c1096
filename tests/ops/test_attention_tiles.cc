// Flash attention's AVX2 tile products against the plain ones: the same bits (the AVX2 tiles
// exist to give the scalar path's results at vector speed), for every row count, column tail,
// K length and the accumulate / row_scale ends, with poisoned C beyond the written columns.
// The AVX-512 FMA tile (bf16 products as f32 FMAs) against its own FMA chain, bit for bit.
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

// One tile case: A (m rows, lda apart) and a B panel of k_steps steps, as f32 and as bf16;
// C's start (ldc apart, -7 past the first n columns, which no tile may write); row scales,
// applied on odd m when accumulating.
struct TileCase {
  int m, n;
  int64_t k_steps;
  bool accumulate;
  int64_t lda, ldc;
  std::vector<float> a32, b32, row_scale, start;
  std::vector<uint16_t> a16, b16;

  TileCase(std::mt19937& rng, int m_, int n_, int64_t k_steps_, bool accumulate_)
      : m(m_), n(n_), k_steps(k_steps_), accumulate(accumulate_), lda(2 * k_steps_ + 3), ldc(kAttnPanel + 5) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    a32.resize(size_t(m * lda));
    b32.resize(size_t(k_steps * kAttnPanel * 2 + 1));
    a16.resize(a32.size());
    b16.resize(b32.size());
    for (size_t i = 0; i < a32.size(); ++i) a16[i] = f32_to_bf16(a32[i] = normal(rng));
    for (size_t i = 0; i < b32.size(); ++i) b16[i] = f32_to_bf16(b32[i] = normal(rng));
    row_scale.resize(size_t(m));
    start.assign(size_t(m * ldc), -7.0f);
    for (int i = 0; i < m; ++i) {
      row_scale[size_t(i)] = normal(rng);
      for (int j = 0; j < n; ++j) start[size_t(i * ldc + j)] = normal(rng);
    }
  }
  const float* scales() const { return accumulate && m % 2 ? row_scale.data() : nullptr; }
  AttnGemmTile tile(bool bf16, float* c) const {
    AttnGemmTile t;
    t.m = m;
    t.n = n;
    t.k_steps = k_steps;
    t.a = bf16 ? static_cast<const void*>(a16.data()) : a32.data();
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

TEST(AttentionTiles, Avx2GivesTheScalarBits) {
  if (!isa_at_least(Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(7);
  for (bool bf16 : {false, true})
    for (int64_t k_steps : {0, 1, 3, 32, 77})
      for (int m = 1; m <= kAttnTileRows; ++m)
        for (int n : {1, 7, 8, 17, 32})
          for (bool accumulate : {false, true}) {
            const TileCase c(rng, m, n, k_steps, accumulate);
            std::vector<float> want = c.start, got = c.start;
            (bf16 ? kernels::attn_gemm_tile_bf16_scalar : kernels::attn_gemm_tile_f32_scalar)(c.tile(bf16, want.data()));
            (bf16 ? kernels::attn_gemm_tile_bf16_avx2 : kernels::attn_gemm_tile_f32_avx2)(c.tile(bf16, got.data()));
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
                << (bf16 ? "bf16 " : "f32 ") << c.describe();
          }
}

// The FMA variant's bf16 tile is acc = fma(a1, b1, fma(a0, b0, acc)) per K pair, in K order,
// then c * row_scale + acc in one rounding when accumulating: a scalar model of that chain
// (std::fma) gives its bits for every row count, column tail and K, columns past n untouched.
TEST(AttentionTiles, Avx512FmaTileIsItsFmaChain) {
  if (!isa_at_least(Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
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
          std::vector<float> want = c.start, got = c.start;
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
          kernels::attn_gemm_tile_bf16_fma_avx512(c.tile(true, got.data()));
          ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0) << c.describe();
        }
}

}  // namespace
}  // namespace sol
