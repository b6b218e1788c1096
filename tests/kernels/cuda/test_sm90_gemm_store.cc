// The TMA-store epilogue's layout (sm90_gemm_store.h) against the PTX ISA, restated here rather
// than taken from sm90_fragment.h / sm90_swizzle.h: the wgmma f32 accumulator figure (m64nNk16,
// "Register fragments": warp w of the warpgroup holds rows 16w..16w+15; lane l's register pair
// {d[4j], d[4j+1]} sits in row l/4 of them at columns 8j + 2(l%4) + {0, 1}, and {d[4j+2],
// d[4j+3]} eight rows below) and the 128-byte TMA swizzle (16-byte chunk c of box row r lands at
// chunk c ^ (r % 8)). Every staged pair must land where a TMA store box reads its element, and
// each box must be covered exactly once. Also: D's box as the launchers encode it, and the
// staging area in the plan's shared-memory budget.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/sm90/sm90_gemm_boxes.h"
#include "kernels/cuda/sm90/sm90_gemm_config.h"
#include "kernels/cuda/sm90/sm90_gemm_plan.h"
#include "kernels/cuda/sm90/sm90_gemm_store.h"
#include "ops/error_message.h"

namespace sol::kernels::sm90 {
namespace {

using testing_errors::message_of;

struct Element {
  u32 row, col;
};

// The PTX ISA's wgmma D fragment: register `reg` of warpgroup thread `thread`.
Element ptx_fragment(u32 thread, u32 reg) {
  const u32 warp = thread / 32, lane = thread % 32, pair = reg / 2;
  return {16 * warp + lane / 4 + 8 * (pair % 2), 8 * (pair / 2) + 2 * (lane % 4) + reg % 2};
}

// Where TMA reads box element (row, col) of a 128-byte-swizzled box with `eb`-byte elements.
u32 ptx_box_byte(u32 row, u32 col, u32 eb) {
  const u32 byte = col * eb;
  return row * 128 + ((byte / 16) ^ (row % 8)) * 16 + byte % 16;
}

void check_staging_map(u32 block_n, u32 eb) {
  SCOPED_TRACE(testing::Message() << "block_n " << block_n << ", " << eb << "-byte D");
  const u32 cols = store_box_cols(eb);
  ASSERT_EQ(cols * eb, 128u);
  ASSERT_EQ(store_boxes(block_n, eb) * cols, block_n);
  for (u32 box = 0; box < store_boxes(block_n, eb); ++box) {
    std::vector<int> covered(kStoreBoxRows * cols, 0);
    for (u32 t = 0; t < 128; ++t)
      for (u32 j = 0; j < store_box_regs(eb); j += 2) {
        const u32 reg = store_box_first_reg(box, eb) + j;
        for (u32 h = 0; h < 2; ++h) {
          const Element e = ptx_fragment(t, reg + h);
          ASSERT_EQ(e.col / cols, box) << "thread " << t << " register " << reg + h << " is not in box " << box;
          const u32 in_box = e.col % cols;
          EXPECT_EQ(store_pair_offset(t, reg, eb) + h * eb, ptx_box_byte(e.row, in_box, eb))
              << "thread " << t << " register " << reg + h;
          ++covered[e.row * cols + in_box];
        }
      }
    for (u32 i = 0; i < covered.size(); ++i) ASSERT_EQ(covered[i], 1) << "box " << box << " element " << i;
  }
}

TEST(Sm90GemmStore, StagedPairsLandWhereTheTmaBoxReadsThem) {
  for (u32 block_n : {64u, 128u, 256u})
    for (u32 eb : {2u, 4u}) check_staging_map(block_n, eb);
}

// The registers of one box form one contiguous run per thread: the epilogue's loop bounds.
TEST(Sm90GemmStore, EachBoxIsAContiguousRunOfRegisters) {
  for (u32 eb : {2u, 4u})
    for (u32 reg = 0; reg < 128; ++reg) {
      const u32 box = reg / store_box_regs(eb);
      EXPECT_EQ(ptx_fragment(5, reg).col / store_box_cols(eb), box) << reg;
      EXPECT_EQ(store_box_first_reg(box, eb) + reg % store_box_regs(eb), reg);
    }
}

// D's box: one 128-byte row of columns by 64 rows, D's shape and row stride, 128-byte swizzle;
// a row stride TMA cannot take is an error naming the operand.
TEST(Sm90GemmStore, DBoxAsTheLaunchersEncodeIt) {
  const TmaBox bf16 = gemm_store_box(reinterpret_cast<void*>(std::uintptr_t(4096)), 131, 136, 2, "t");
  EXPECT_EQ(bf16.element_bytes, 2u);
  EXPECT_EQ(bf16.dims[0], 136u);
  EXPECT_EQ(bf16.dims[1], 131u);
  EXPECT_EQ(bf16.strides_bytes[1], 272u);
  EXPECT_EQ(bf16.box[0], 64u);
  EXPECT_EQ(bf16.box[1], 64u);
  EXPECT_EQ(bf16.swizzle, Swizzle::b128);
  const TmaBox f32 = gemm_store_box(reinterpret_cast<void*>(std::uintptr_t(4096)), 7, 200, 4, "t");
  EXPECT_EQ(f32.box[0], 32u);
  EXPECT_EQ(f32.strides_bytes[1], 800u);
  EXPECT_NE(message_of([] { gemm_store_box(reinterpret_cast<void*>(std::uintptr_t(4096)), 8, 12, 2, "t"); })
                .find("strides_bytes[1] = 24 is not a multiple of 16"),
            std::string::npos);
}

// The staging buffers sit between the ring and the barriers, on the swizzle period, and the
// chooser's shared-memory model counts them as the plan lays them out.
template <class Plan>
void check_budget(GemmKernelKind kind) {
  static_assert(Plan::staging_offset % swizzle_period_bytes(kStoreSwizzle) == 0);
  static_assert(Plan::staging_offset == Plan::stages * (Plan::a_stage_bytes + Plan::b_stage_bytes));
  static_assert(Plan::barrier_offset == Plan::staging_offset + Plan::consumers * kStoreBuffers * kStoreBoxBytes);
  EXPECT_EQ(Plan::store_buffer_offset(Plan::consumers - 1, kStoreBuffers - 1) + kStoreBoxBytes, Plan::barrier_offset);
  const u32 scales = kind == GemmKernelKind::e4m3_block_scaled ? Plan::stages * Plan::block_m * 4 : 0;
  EXPECT_EQ(ring_smem_bytes(kind, Plan::block_m, Plan::block_n, Plan::stages), Plan::smem_bytes + scales);
}

TEST(Sm90GemmStore, StagingIsInThePlanAndTheChoosersBudget) {
  check_budget<GemmTilePlan<128, 128, 6, 2, 2>>(GemmKernelKind::bf16);
  check_budget<GemmTilePlan<128, 256, 4, 2, 2>>(GemmKernelKind::bf16);
  check_budget<GemmTilePlan<64, 64, 8, 1, 1>>(GemmKernelKind::e4m3);
  check_budget<GemmTilePlan<128, 128, 5, 2, 1>>(GemmKernelKind::e4m3_block_scaled);
  // 128 x 256 bf16 keeps 4 stages with 32 KiB of staging; 128 x 128 drops from 7 stages to 6.
  EXPECT_LE(ring_smem_bytes(GemmKernelKind::bf16, 128, 256, 4), 227u * 1024);
  EXPECT_GT(ring_smem_bytes(GemmKernelKind::bf16, 128, 128, 7), 227u * 1024);
  EXPECT_LE(ring_smem_bytes(GemmKernelKind::bf16, 128, 128, 6), 227u * 1024);
}

}  // namespace
}  // namespace sol::kernels::sm90
