// Flash attention's AVX2 tile products against the plain ones: the same bits (the AVX2 tiles
// exist to give the scalar path's results at vector speed), for every row count, column tail,
// K length and the accumulate / row_scale ends, with poisoned C beyond the written columns.
// The AVX-512 FMA tile (bf16 products as f32 FMAs) against its own FMA chain, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "sol/dtype.h"
#include "sol/hw.h"

namespace sol {
namespace {

using kernels::AttnGemmTile;
using kernels::kAttnPanel;
using kernels::kAttnTileRows;

TEST(AttentionTiles, Avx2GivesTheScalarBits) {
  if (!isa_at_least(Isa::avx2)) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (bool bf16 : {false, true})
    for (int64_t k_steps : {0, 1, 3, 32, 77})
      for (int m = 1; m <= kAttnTileRows; ++m)
        for (int n : {1, 7, 8, 17, 32})
          for (bool accumulate : {false, true}) {
            const int64_t lda = 2 * k_steps + 3, ldc = kAttnPanel + 5;
            std::vector<float> a32(size_t(m * lda)), b32(size_t(k_steps * kAttnPanel * 2 + 1));
            std::vector<uint16_t> a16(a32.size()), b16(b32.size());
            for (size_t i = 0; i < a32.size(); ++i) a16[i] = f32_to_bf16(a32[i] = normal(rng));
            for (size_t i = 0; i < b32.size(); ++i) b16[i] = f32_to_bf16(b32[i] = normal(rng));
            std::vector<float> row_scale(static_cast<size_t>(m)), start(static_cast<size_t>(m * ldc), -7.0f);
            for (int i = 0; i < m; ++i) {
              row_scale[size_t(i)] = normal(rng);
              for (int j = 0; j < n; ++j) start[size_t(i * ldc + j)] = normal(rng);
            }
            std::vector<float> want = start, got = start;
            AttnGemmTile t;
            t.m = m;
            t.n = n;
            t.k_steps = k_steps;
            t.a = bf16 ? static_cast<const void*>(a16.data()) : a32.data();
            t.lda = lda;
            t.b = bf16 ? static_cast<const void*>(b16.data()) : b32.data();
            t.ldc = ldc;
            t.accumulate = accumulate;
            t.row_scale = accumulate && m % 2 ? row_scale.data() : nullptr;
            t.c = want.data();
            (bf16 ? kernels::attn_gemm_tile_bf16_scalar : kernels::attn_gemm_tile_f32_scalar)(t);
            t.c = got.data();
            (bf16 ? kernels::attn_gemm_tile_bf16_avx2 : kernels::attn_gemm_tile_f32_avx2)(t);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
                << (bf16 ? "bf16" : "f32") << " k_steps=" << k_steps << " m=" << m << " n=" << n
                << " accumulate=" << accumulate;
          }
}

// The FMA variant's bf16 tile is acc = fma(a1, b1, fma(a0, b0, acc)) per K pair, in K order,
// then c * row_scale + acc in one rounding when accumulating: a scalar model of that chain
// (std::fma) gives its bits for every row count, column tail and K, columns past n untouched.
TEST(AttentionTiles, Avx512FmaTileIsItsFmaChain) {
  if (!isa_at_least(Isa::avx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
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
          const int64_t lda = 2 * k_steps + 3, ldc = kAttnPanel + 5;
          std::vector<uint16_t> a(size_t(m * lda)), b(size_t(k_steps * kAttnPanel * 2 + 1));
          for (uint16_t& v : a) v = f32_to_bf16(normal(rng));
          for (uint16_t& v : b) v = f32_to_bf16(normal(rng));
          std::vector<float> row_scale(static_cast<size_t>(m)), got(static_cast<size_t>(m * ldc), -7.0f);
          for (int i = 0; i < m; ++i) {
            row_scale[size_t(i)] = normal(rng);
            for (int j = 0; j < n; ++j) got[size_t(i * ldc + j)] = normal(rng);
          }
          std::vector<float> want = got;
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              float acc = 0.0f;
              for (int64_t k = 0; k < k_steps; ++k) {
                const uint16_t* pair = &a[size_t(i * lda + 2 * k)];
                const uint16_t* col = &b[size_t((k * kAttnPanel + j) * 2)];
                acc = std::fma(widen(pair[1]), widen(col[1]), std::fma(widen(pair[0]), widen(col[0]), acc));
              }
              float& c = want[size_t(i * ldc + j)];
              const float rs = accumulate && m % 2 ? row_scale[size_t(i)] : 1.0f;
              c = accumulate ? std::fma(c, rs, acc) : acc;
            }
          AttnGemmTile t;
          t.m = m;
          t.n = n;
          t.k_steps = k_steps;
          t.a = a.data();
          t.lda = lda;
          t.b = b.data();
          t.c = got.data();
          t.ldc = ldc;
          t.accumulate = accumulate;
          t.row_scale = accumulate && m % 2 ? row_scale.data() : nullptr;
          kernels::attn_gemm_tile_bf16_fma_avx512(t);
          ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
              << "k_steps=" << k_steps << " m=" << m << " n=" << n << " accumulate=" << accumulate;
        }
}

}  // namespace
}  // namespace sol
