// The sm90 layout math against the layouts the PTX ISA documents. Each expectation below is
// written from the document named beside it, not derived from the functions under test.
#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "kernels/cuda/sm90/sm90_descriptor.h"
#include "kernels/cuda/sm90/sm90_fragment.h"
#include "kernels/cuda/sm90/sm90_gemm_boxes.h"
#include "kernels/cuda/sm90/sm90_gemm_plan.h"
#include "kernels/cuda/sm90/sm90_ring.h"

namespace sol::kernels::sm90 {
namespace {

// PTX ISA, "Tensor-copy swizzling modes" (and cuda.h, CUtensorMapSwizzle: "swizzle 16B chunks
// within an N-byte span"): in N-byte rows the 16-byte chunk index is XORed with the row index
// modulo N/16, rows grouped by 128/N so that the pattern spans 8 lines of 128 bytes.
u32 documented_swizzle(u32 span, u32 offset) {
  const u32 row = offset / span, chunk = (offset % span) / 16, rows_per_line = 128 / span;
  return row * span + 16 * (chunk ^ ((row / rows_per_line) % (span / 16))) + offset % 16;
}

TEST(Sm90Swizzle, MatchesTheDocumentedChunkPermutationForEveryMode) {
  for (auto [mode, span] : {std::pair{Swizzle::b128, 128u}, std::pair{Swizzle::b64, 64u}, std::pair{Swizzle::b32, 32u}})
    for (u32 offset = 0; offset < 4 * 1024; ++offset)
      ASSERT_EQ(swizzle_address(mode, offset), documented_swizzle(span, offset)) << "span " << span << " offset " << offset;
  for (u32 offset = 0; offset < 4096; ++offset) ASSERT_EQ(swizzle_address(Swizzle::none, offset), offset);
}

TEST(Sm90Swizzle, DocumentedRowsOfThe128ByteMode) {
  // PTX ISA 128B swizzle figure: row 1 swaps neighbouring chunks, row 7 reverses them.
  const u32 row1[8] = {1, 0, 3, 2, 5, 4, 7, 6}, row7[8] = {7, 6, 5, 4, 3, 2, 1, 0};
  for (u32 c = 0; c < 8; ++c) {
    EXPECT_EQ(swizzle_address(Swizzle::b128, 128 + 16 * c), 128 + 16 * row1[c]);
    EXPECT_EQ(swizzle_address(Swizzle::b128, 7 * 128 + 16 * c), 7 * 128 + 16 * row7[c]);
    EXPECT_EQ(swizzle_address(Swizzle::b128, 8 * 128 + 16 * c), 8 * 128 + 16 * c);  // period 1024 bytes
  }
  EXPECT_EQ(swizzle_address(Swizzle::b64, 2 * 64 + 16), 2 * 64);      // 64B: rows 2-3 XOR chunk by 1
  EXPECT_EQ(swizzle_address(Swizzle::b64, 6 * 64), 6 * 64 + 48);      // rows 6-7 by 3
  EXPECT_EQ(swizzle_address(Swizzle::b32, 4 * 32), 4 * 32 + 16);      // 32B: rows 4-7 by 1
  EXPECT_EQ(swizzle_address(Swizzle::b32, 3 * 32 + 16), 3 * 32 + 16);  // rows 0-3 unchanged
}

TEST(Sm90Swizzle, IsAnInvolutionInsideEachPeriod) {
  for (Swizzle s : {Swizzle::none, Swizzle::b32, Swizzle::b64, Swizzle::b128}) {
    const u32 period = swizzle_period_bytes(s);
    for (u32 o = 0; o < 2 * period; ++o) {
      ASSERT_EQ(swizzle_address(s, swizzle_address(s, o)), o);
      ASSERT_EQ(swizzle_address(s, o) / period, o / period);
    }
  }
}

TEST(Sm90Swizzle, TmaEnumeratorsMatchCudaH) {
  // cuda.h, CUtensorMapSwizzle: NONE 0, 32B 1, 64B 2, 128B 3.
  EXPECT_EQ(tma_swizzle(Swizzle::none), 0u);
  EXPECT_EQ(tma_swizzle(Swizzle::b32), 1u);
  EXPECT_EQ(tma_swizzle(Swizzle::b64), 2u);
  EXPECT_EQ(tma_swizzle(Swizzle::b128), 3u);
}

TEST(Sm90Descriptor, FieldsSitWhereThePtxIsaPutsThem) {
  // PTX ISA "Matrix Descriptor Format" (wgmma): start >> 4 in bits 0-13, LBO >> 4 in 16-29,
  // SBO >> 4 in 32-45, base offset in 49-51, layout type in 62-63 (1 = 128B, 2 = 64B, 3 = 32B).
  EXPECT_EQ(encode_smem_desc({0x400, 16, 1024, 0, Swizzle::b128}), 0x4000004000010040ull);
  EXPECT_EQ(encode_smem_desc({0x3FFF0, 0x3FFF0, 0x3FFF0, 7, Swizzle::b32}),
            (3ull << 62) | (7ull << 49) | (0x3FFFull << 32) | (0x3FFFull << 16) | 0x3FFFull);
  EXPECT_EQ(encode_smem_desc({0, 0, 0, 0, Swizzle::b64}), 2ull << 62);
  EXPECT_EQ(encode_smem_desc({0x80, 0, 256, 0, Swizzle::none}), (16ull << 32) | 8ull);
  // The shared window is 18 bits wide; higher address bits never reach the field.
  EXPECT_EQ(encode_smem_desc({0x40400, 0, 0, 0, Swizzle::none}), 0x40ull);
}

TEST(Sm90Descriptor, KMajorTilesStepEightRowsByOnePeriod) {
  // 8 rows of one swizzle width: SBO = 1024 bytes for 128B, 512 for 64B, 256 for 32B; LBO unused.
  EXPECT_EQ(kmajor_desc(0x1000, Swizzle::b128), (1ull << 62) | (64ull << 32) | 0x100ull);
  EXPECT_EQ(kmajor_desc(0x1000, Swizzle::b64), (2ull << 62) | (32ull << 32) | 0x100ull);
  EXPECT_EQ(kmajor_desc(0x1000, Swizzle::b32), (3ull << 62) | (16ull << 32) | 0x100ull);
  EXPECT_EQ(advance_smem_desc(kmajor_desc(0x1000, Swizzle::b128), 96), kmajor_desc(0x1060, Swizzle::b128));
}

TEST(Sm90Descriptor, MnMajorTilesStrideKByOnePeriodAndMnByTheirBox) {
  // PTX ISA, strides of swizzled MN-major layouts: SBO is the offset between 8 columns (rows of
  // K, W bytes each: one period), LBO the offset between (W/16)-row groups of 16-byte MN units,
  // i.e. from one W-byte stretch of MN to the next (here one TMA box of 64 rows of K apart).
  EXPECT_EQ(mnmajor_desc(0x2000, Swizzle::b128, 8192), (1ull << 62) | (64ull << 32) | (512ull << 16) | 0x200ull);
  EXPECT_EQ(mnmajor_desc(0x2000, Swizzle::b64, 4096), (2ull << 62) | (32ull << 32) | (256ull << 16) | 0x200ull);
  EXPECT_EQ(mnmajor_desc(0x2000, Swizzle::b32, 2048), (3ull << 62) | (16ull << 32) | (128ull << 16) | 0x200ull);
}

// Where the tensor core reads element (mn, k) of a bf16 MN-major operand through descriptor
// `desc`: the fields as "Matrix Descriptor Format" places them, the canonical layout of the
// "Shared Memory Matrix Layout" section for swizzled MN-major operands, ((T, W/16, m), (8, k)) :
// ((1, T, LBO), (W/16 * T, SBO)) with T = 8 bf16 (16 bytes), then the swizzle of the absolute
// address.
u32 documented_mn_major_read(u64 desc, u32 mn, u32 k) {
  const u32 start = u32(desc & 0x3FFF) << 4, lbo = u32((desc >> 16) & 0x3FFF) << 4;
  const u32 sbo = u32((desc >> 32) & 0x3FFF) << 4, type = u32(desc >> 62);
  const u32 span = type == 1 ? 128 : type == 2 ? 64 : 32, t = 8, units = span / 16;
  const u32 element = (mn % t) + ((mn / t) % units) * t + (k % 8) * units * t;  // inside one atom
  return documented_swizzle(span, start + (mn / (t * units)) * lbo + (k / 8) * sbo + 2 * element);
}

// Where a 2-d TMA load of a bf16 box (box_inner elements wide, rows packed) at global origin
// (c0 innermost, c1) into `dst` with 128B swizzle puts global element (row g1, column g0).
u32 documented_tma_write(u32 dst, u32 box_inner, int c0, int c1, u32 g0, u32 g1) {
  return dst + documented_swizzle(128, (g1 - u32(c1)) * box_inner * 2 + (g0 - u32(c0)) * 2);
}

// Layout nn: B [K, N] as stored. For each wgmma of a K block, every element (k, n) it reads of B
// must be where the plan's TMA boxes wrote global element (k0 + k, n0 + n): box order, box
// offsets and coordinates, LBO, SBO, the K step and the swizzle all enter.
template <class Plan>
void expect_mn_major_b_reads_what_tma_wrote() {
  static_assert(Plan::b_mn_major);
  constexpr u32 base = 3 * 1024;
  const int k0 = 3 * int(Plan::block_k), n0 = 2 * int(Plan::block_n);
  for (u32 stage : {0u, Plan::stages - 1})
    for (u32 mma = 0; mma < Plan::mmas_per_k_block; ++mma) {
      const u64 desc = Plan::desc_b(base, stage, mma);
      for (u32 n = 0; n < Plan::block_n; ++n)
        for (u32 k = 0; k < Plan::mma_k; ++k) {
          const u32 gk = u32(k0) + mma * Plan::mma_k + k, gn = u32(n0) + n;
          int holders = 0;
          u32 written = 0;
          for (u32 box = 0; box < Plan::b_boxes; ++box) {
            const int c0 = Plan::b_box_c0(k0, n0, box), c1 = Plan::b_box_c1(k0, n0, box);
            if (gn < u32(c0) || gn >= u32(c0) + Plan::b_box_inner || gk < u32(c1) || gk >= u32(c1) + Plan::b_box_outer)
              continue;
            ++holders;
            written = documented_tma_write(base + Plan::b_box_offset(stage, box), Plan::b_box_inner, c0, c1, gn, gk);
          }
          ASSERT_EQ(holders, 1) << "element (" << gk << ", " << gn << ") is in " << holders << " boxes";
          ASSERT_EQ(documented_mn_major_read(desc, n, k), written)
              << "block_n " << Plan::block_n << " stage " << stage << " mma " << mma << " (k " << k << ", n " << n << ")";
        }
    }
  // Each box is one 128-byte swizzled row of N by one K block, within TMA's rules; together they
  // are exactly the stage the full barrier expects.
  const TmaBox box = gemm_tile_b_box<Plan>(reinterpret_cast<const void*>(std::uintptr_t(1) << 20), 1000, 4000, 1000,
                                           "test");
  EXPECT_EQ(box.dims[0], 1000u);  // N innermost
  EXPECT_EQ(box.dims[1], 4000u);
  EXPECT_EQ(box.strides_bytes[1], 2000u);
  EXPECT_EQ(box.box[0] * box.element_bytes, 128u);
  EXPECT_EQ(box.box[1], Plan::block_k);
  EXPECT_EQ(box.swizzle, Swizzle::b128);
  EXPECT_EQ(Plan::b_boxes * box.box[0] * box.box[1] * box.element_bytes, Plan::b_stage_bytes);
}

TEST(Sm90GemmPlanNn, EveryElementOfAnMnMajorBIsReadWhereTmaWroteIt) {
  expect_mn_major_b_reads_what_tma_wrote<GemmBf16NnPlan128x128>();
  expect_mn_major_b_reads_what_tma_wrote<GemmTilePlan<64, 64, 2, 1, 2, OperandMajor::mn>>();
  expect_mn_major_b_reads_what_tma_wrote<GemmTilePlan<128, 256, 3, 2, 2, OperandMajor::mn>>();
}

TEST(Sm90Fragment, DocumentedRegistersOfTheM64nNk16Accumulator) {
  // PTX ISA, "Matrix fragments for wgmma .m64nNk16", D figure: thread T0 holds d0,d1 at
  // (0,0),(0,1), d2,d3 at (8,0),(8,1), d4 at (0,8); T1 starts at column 2; T4 at row 1; warp 1
  // (T32) at row 16.
  const u32 cases[][4] = {{0, 0, 0, 0},  {0, 1, 0, 1},  {0, 2, 8, 0},   {0, 3, 8, 1},  {0, 4, 0, 8},
                          {1, 0, 0, 2},  {3, 1, 0, 7},  {4, 0, 1, 0},   {31, 7, 15, 15}, {32, 0, 16, 0},
                          {127, 63, 63, 127}, {5, 62, 9, 122}};
  for (const auto& c : cases) {
    EXPECT_EQ(accum_row(c[0], c[1]), c[2]) << "thread " << c[0] << " reg " << c[1];
    EXPECT_EQ(accum_col(c[0], c[1]), c[3]) << "thread " << c[0] << " reg " << c[1];
  }
}

TEST(Sm90Fragment, EveryElementOfDHasExactlyOneOwner) {
  for (u32 n : {8u, 64u, 128u, 256u}) {
    std::set<std::pair<u32, u32>> seen;
    for (u32 t = 0; t < 128; ++t)
      for (u32 i = 0; i < accum_regs(n); ++i) {
        const u32 r = accum_row(t, i), c = accum_col(t, i);
        ASSERT_LT(r, 64u);
        ASSERT_LT(c, n);
        ASSERT_TRUE(seen.emplace(r, c).second) << "n " << n << " (" << r << ", " << c << ") twice";
        if (i % 2 == 1) {
          ASSERT_EQ(c, accum_col(t, i - 1) + 1);  // pairs are adjacent: one bf16x2 store
        }
      }
    EXPECT_EQ(seen.size(), 64u * n);
  }
}

TEST(Sm90Ring, ParitiesFlipOncePerLap) {
  RingCursor<3> ring;
  const u32 expected[][4] = {{0, 0, 0, 1}, {1, 0, 0, 1}, {2, 0, 0, 1}, {0, 1, 1, 0}, {1, 1, 1, 0}, {2, 1, 1, 0}, {0, 0, 0, 1}};
  for (const auto& e : expected) {
    EXPECT_EQ(ring.stage, e[0]);
    EXPECT_EQ(ring.phase, e[1]);
    EXPECT_EQ(ring.full_parity(), e[2]);
    EXPECT_EQ(ring.empty_parity(), e[3]);
    ring.advance();
  }
}

}  // namespace
}  // namespace sol::kernels::sm90
