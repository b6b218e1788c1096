// The CPU model of the sm90 GEMM tile kernel (TMA box -> swizzled shared memory -> wgmma
// through descriptors -> accumulator fragments -> epilogue) equals a plain matmul on random
// data, for bf16 and fp8 e4m3, on shapes that leave partial tiles in M, N and K.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/sm90/model/sm90_gemm_model.h"
#include "kernels/cuda/sm90/sm90_descriptor.h"
#include "kernels/cuda/sm90/sm90_gemm_plan.h"
#include "ops/error_message.h"
#include "sol/dtype.h"

namespace sol::kernels::sm90 {
namespace {

using testing_errors::message_of;

struct Operands {
  std::vector<u8> a, b;        // encoded elements, K-major
  std::vector<double> fa, fb;  // their exact values
};

Operands random_operands(u32 m, u32 n, u32 k, u32 element_bytes, u32 seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Operands o;
  auto fill = [&](std::vector<u8>& bytes, std::vector<double>& values, std::size_t count) {
    bytes.resize(count * element_bytes);
    values.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
      if (element_bytes == 2) {
        const u16 bits = f32_to_bf16(dist(rng));
        bytes[2 * i] = u8(bits);
        bytes[2 * i + 1] = u8(bits >> 8);
        values[i] = bf16_to_f32(bits);
      } else {
        bytes[i] = f32_to_e4m3(dist(rng) * 8.0f);
        values[i] = e4m3_to_f32(bytes[i]);
      }
    }
  };
  fill(o.a, o.fa, std::size_t(m) * k);
  fill(o.b, o.fb, std::size_t(n) * k);
  return o;
}

// ||model - reference|| / ||reference|| with the reference in fp64.
template <class Plan>
double model_error(u32 m, u32 n, u32 k, u32 seed) {
  const Operands o = random_operands(m, n, k, Plan::element_bytes, seed);
  std::vector<u16> d(std::size_t(m) * n, 0xFFFF);  // poisoned: NaN in bf16
  std::vector<u32> writes;
  model::gemm_tile_model<Plan>(o.a.data(), o.b.data(), d.data(), m, n, k, seed, nullptr, nullptr, &writes);
  // The TMA store boxes, clipped at D's edges, write each element of D exactly once.
  EXPECT_EQ(std::count(writes.begin(), writes.end(), 1u), std::ptrdiff_t(writes.size()));
  double err = 0, ref = 0;
  for (u32 i = 0; i < m; ++i)
    for (u32 j = 0; j < n; ++j) {
      double r = 0;
      for (u32 p = 0; p < k; ++p) r += o.fa[std::size_t(i) * k + p] * o.fb[std::size_t(j) * k + p];
      const double e = bf16_to_f32(d[std::size_t(i) * n + j]) - r;
      err += e * e;
      ref += r * r;
    }
  return std::sqrt(err / ref);
}

TEST(Sm90GemmModel, Bf16TilesEqualAPlainMatmul) {
  // One full tile, then partial tiles in M (200 = 128 + 72), N (136) and K (200 = 3 x 64 + 8).
  EXPECT_LT(model_error<GemmBf16Plan128x128>(128, 128, 64, 1), 1e-2);
  EXPECT_LT(model_error<GemmBf16Plan128x128>(200, 136, 200, 2), 1e-2);
  EXPECT_LT(model_error<GemmBf16Plan128x128>(1, 8, 8, 3), 1e-2);
}

TEST(Sm90GemmModel, Bf16RingLapsManyTimesUnderRandomSchedules) {
  // 10 K blocks on a 4-stage ring: every stage is refilled twice, in many interleavings.
  for (u32 seed = 10; seed < 14; ++seed) EXPECT_LT(model_error<GemmBf16Plan128x128>(64, 64, 640, seed), 1e-2);
}

TEST(Sm90GemmModel, AOneStageRingDeadlocksAsTheDeviceWould) {
  // Consumers free a stage one K block late, so with one stage the producer waits for a
  // release that needs its own next load: the model says so instead of hanging.
  using OneStage = GemmTilePlan<128, 128, 1, 2, 2>;
  const std::string msg = message_of([] { model_error<OneStage>(64, 64, 128, 1); });
  EXPECT_EQ(msg, "sm90 model: GEMM tile (0, 0) deadlocked: no warpgroup can pass its mbarrier");
  EXPECT_LT(model_error<OneStage>(64, 64, 64, 1), 1e-2);  // one K block never needs a release
}

TEST(Sm90GemmModel, E4m3TilesEqualAPlainMatmul) {
  EXPECT_LT(model_error<GemmE4m3Plan128x128>(128, 128, 128, 4), 1e-2);
  EXPECT_LT(model_error<GemmE4m3Plan128x128>(131, 200, 272, 5), 1e-2);
  EXPECT_LT(model_error<GemmE4m3Plan128x128>(64, 64, 1152, 6), 1e-2);
}

// sm90_gemm_tile_fp8.cuh's model against sum_kb sa[row][kb] * sb[col/128][kb] * (block's dot
// product), in fp64: scale indexing, the per-block restart of the partial sums and the promotion.
template <class Plan = GemmE4m3Plan128x128>
double scaled_fp8_model_error(u32 m, u32 n, u32 k, u32 seed) {
  const Operands o = random_operands(m, n, k, 1, seed);
  const u32 kbs = k / 128, nbs = (n + 127) / 128;
  std::mt19937 rng(seed + 100);
  std::uniform_real_distribution<float> scale(0.25f, 4.0f);
  std::vector<float> sa(std::size_t(m) * kbs), sb(std::size_t(nbs) * kbs);
  for (float& x : sa) x = scale(rng);
  for (float& x : sb) x = scale(rng);
  std::vector<u16> d(std::size_t(m) * n, 0xFFFF);
  model::gemm_tile_model<Plan>(o.a.data(), o.b.data(), d.data(), m, n, k, seed, sa.data(), sb.data());
  double err = 0, ref = 0;
  for (u32 i = 0; i < m; ++i)
    for (u32 j = 0; j < n; ++j) {
      double r = 0;
      for (u32 g = 0; g < kbs; ++g) {
        double block = 0;
        for (u32 p = 128 * g; p < 128 * (g + 1); ++p) block += o.fa[std::size_t(i) * k + p] * o.fb[std::size_t(j) * k + p];
        r += double(sa[std::size_t(i) * kbs + g]) * sb[std::size_t(j / 128) * kbs + g] * block;
      }
      const double e = bf16_to_f32(d[std::size_t(i) * n + j]) - r;
      err += e * e;
      ref += r * r;
    }
  return std::sqrt(err / ref);
}

TEST(Sm90GemmModel, E4m3BlockScaledTilesEqualTheScaledMatmul) {
  EXPECT_LT(scaled_fp8_model_error(128, 128, 128, 21), 1e-2);
  EXPECT_LT(scaled_fp8_model_error(131, 200, 640, 22), 1e-2);  // partial tiles, a second B scale block
  EXPECT_LT(scaled_fp8_model_error(1, 8, 1152, 23), 1e-2);
}

// The plans the configuration chooser picks (sm90_gemm_config.h) beyond the 128 x 128 ones:
// one consumer warpgroup (64-row tiles), 256-wide tiles, rings of 2 to 8 stages lapping K,
// partial tiles in M and N.
TEST(Sm90GemmModel, TheChosenConfigurationsPlansEqualAPlainMatmul) {
  EXPECT_LT((model_error<GemmTilePlan<64, 64, 4, 1, 2>>(131, 152, 640, 31)), 1e-2);
  EXPECT_LT((model_error<GemmTilePlan<64, 64, 8, 1, 2>>(70, 64, 576, 32)), 1e-2);
  EXPECT_LT((model_error<GemmTilePlan<64, 256, 5, 1, 2>>(65, 304, 384, 33)), 1e-2);
  EXPECT_LT((model_error<GemmTilePlan<128, 256, 4, 2, 2>>(129, 264, 320, 34)), 1e-2);
  EXPECT_LT((model_error<GemmTilePlan<128, 128, 6, 2, 2>>(100, 136, 512, 35)), 1e-2);
  EXPECT_LT((model_error<GemmTilePlan<64, 64, 2, 1, 1>>(67, 72, 640, 36)), 1e-2);
  EXPECT_LT((model_error<GemmTilePlan<128, 64, 8, 2, 1>>(130, 72, 1152, 37)), 1e-2);
  EXPECT_LT((model_error<GemmTilePlan<64, 256, 4, 1, 1>>(64, 264, 640, 38)), 1e-2);
  EXPECT_LT((scaled_fp8_model_error<GemmTilePlan<64, 128, 2, 1, 1>>(65, 200, 640, 39)), 1e-2);
  EXPECT_LT((scaled_fp8_model_error<GemmTilePlan<128, 128, 6, 2, 1>>(129, 136, 1024, 40)), 1e-2);
}

TEST(Sm90GemmModel, TheKernelsShapeRulesAreErrors) {
  std::vector<u8> a(64 * 64 * 2), b(64 * 64 * 2);
  std::vector<u16> d(64 * 64);
  EXPECT_EQ(message_of([&] { model::gemm_tile_model<GemmBf16Plan128x128>(a.data(), b.data(), d.data(), 8, 12, 64, 0); }),
            "sm90 gemm: n = 12 is not a multiple of 8 (D rows are stored 16-byte aligned)");
  EXPECT_EQ(message_of([&] { model::gemm_tile_model<GemmBf16Plan128x128>(a.data(), b.data(), d.data(), 8, 8, 60, 0); }),
            "sm90 gemm: k = 60 is not a multiple of 8 (TMA row strides are multiples of 16 bytes)");
  const float scale = 1.0f;
  EXPECT_EQ(message_of([&] {
              model::gemm_tile_model<GemmE4m3Plan128x128>(a.data(), b.data(), d.data(), 8, 8, 64, 0, &scale, &scale);
            }),
            "sm90 gemm: k = 64 but fp8 block scales need k % 128 == 0");
}

// The wgmma model on its own, for the swizzle modes the GEMM plan does not use: a 64 x 16 bf16
// A and an 8 x 16 B loaded by the TMA model as K-major boxes of one swizzle width.
TEST(Sm90WgmmaModel, EverySwizzleModeRoundTripsThroughTmaAndDescriptors) {
  for (Swizzle s : {Swizzle::b32, Swizzle::b64, Swizzle::b128}) {
    const u32 k = swizzle_bytes(s) / 2;  // one swizzled row of bf16
    const Operands o = random_operands(64, 8, k, 2, 7);
    model::SharedMemory smem(32 * 1024);
    const model::GlobalTensor2d ga{o.a.data(), 2, k, 64, 2ull * k}, gb{o.b.data(), 2, k, 8, 2ull * k};
    model::tma_load_2d(smem, 1024, ga, k, 64, 0, 0, s);
    model::tma_load_2d(smem, 16 * 1024, gb, k, 8, 0, 0, s);
    model::WarpgroupAccum acc(8);
    for (u32 step = 0; step < k / 16; ++step)
      model::wgmma(smem, advance_smem_desc(kmajor_desc(1024, s), 32 * step),
                   advance_smem_desc(kmajor_desc(16 * 1024, s), 32 * step), acc, model::Operand::bf16, step > 0);
    for (u32 t = 0; t < 128; ++t)
      for (u32 i = 0; i < 4; ++i) {
        const u32 r = accum_row(t, i), c = accum_col(t, i);
        double ref = 0;
        for (u32 p = 0; p < k; ++p) ref += o.fa[r * k + p] * o.fb[c * k + p];
        ASSERT_NEAR(acc.at(t, i), ref, 1e-4 * (1 + std::abs(ref))) << "swizzle " << swizzle_bytes(s) << " (" << r << ", " << c << ")";
      }
  }
}

TEST(Sm90WgmmaModel, ADescriptorOffItsSwizzleRowIsRefused) {
  model::SharedMemory smem(4096);
  model::WarpgroupAccum acc(8);
  const std::string msg = message_of(
      [&] { model::wgmma(smem, kmajor_desc(128, Swizzle::b128), kmajor_desc(0, Swizzle::b128), acc, model::Operand::bf16, false); });
  EXPECT_EQ(msg, "sm90 model: descriptor start 128 is not on its swizzle pattern's row 0 (base offset not modelled)");
}

}  // namespace
}  // namespace sol::kernels::sm90
