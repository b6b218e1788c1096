// The persistent sm90 GEMM's tile scheduler and its CPU model: every tile of one GEMM and of the
// two MoE grouped layouts is computed exactly once, with one ring carried across a CTA's tiles;
// results equal an fp64 reference per group; padding rows (contiguous) and rows past masked_m
// (masked) keep their poison; split-K partials reduce in order.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "kernels/cuda/sm90/model/sm90_gemm_persistent_model.h"
#include "kernels/cuda/sm90/sm90_gemm_plan.h"
#include "kernels/cuda/sm90/sm90_gemm_scheduler.h"
#include "ops/error_message.h"
#include "sm90_gemm_model_cases.h"

namespace sol::kernels::sm90 {
namespace {

using testing_errors::message_of;
using namespace model_cases;

// Runs the model and returns ||D - reference|| / ||reference|| over the result rows; rows that
// are no result must still hold the poison.
template <class Plan>
double run_error(Case& c, u32 ctas, u32 seed) {
  using Scheduler = GemmTileScheduler<Plan::block_m, Plan::block_n, 2>;
  std::vector<u16> d(u64(c.rows) * c.p.n, kPoison);
  std::vector<float> workspace(c.p.split_k > 1 ? u64(c.p.split_k) * c.rows * c.p.n : 0, -1.0f);
  model::GemmOutput out;
  out.epilogue.d = d.data();
  out.workspace = workspace.empty() ? nullptr : workspace.data();
  out.rows = c.rows;
  std::vector<u32> writes(u64(c.rows) * c.p.n, 0);
  out.writes = &writes;
  const bool scaled = !c.sa.empty();
  model::gemm_persistent_model<Plan, Scheduler>(c.a.bytes.data(), c.b.bytes.data(), c.p, c.k, out, ctas, seed,
                                                scaled ? c.sa.data() : nullptr, scaled ? c.sb.data() : nullptr);
  double err = 0, ref = 0;
  const u32 n = c.p.n;
  u32 wrong_writes = 0;
  for (u32 row = 0; row < c.rows; ++row) {
    const int g = group_of(c, row);
    for (u32 col = 0; col < n; ++col) {
      // Every result written exactly once (TMA boxes and register stores together), nothing else.
      wrong_writes += writes[u64(row) * n + col] != (g < 0 ? 0u : 1u);
      const u16 got = d[u64(row) * n + col];
      if (g < 0) {
        EXPECT_EQ(got, kPoison) << "row " << row << " is no result but was written";
        continue;
      }
      const double r = reference_sum(c, row, g, col);
      const double e = bf16_to_f32(got) - r;
      err += e * e;
      ref += r * r;
    }
  }
  EXPECT_EQ(wrong_writes, 0u) << "elements of D not written exactly once (results) or never (the rest)";
  return ref > 0 ? std::sqrt(err / ref) : std::sqrt(err);
}

using Bf16Plan64 = GemmTilePlan<64, 64, 2, 1, 2>;
using Bf16Plan128 = GemmTilePlan<128, 128, 3, 2, 2>;
using E4m3Plan = GemmTilePlan<128, 128, 4, 2, 1>;

TEST(Sm90GemmScheduler, EveryTileOnceInEveryLayout) {
  using S = GemmTileScheduler<64, 64, 3>;
  std::vector<int> row_group(448, -1), masked = {150, 0, 64, 1};
  for (int r = 0; r < 70; ++r) row_group[r] = 0;          // group 0: rows 0..69, padded to 128
  for (int r = 128; r < 320; ++r) row_group[r] = 2;       // group 1 empty; group 2: 192 rows
  for (int r = 320; r < 321; ++r) row_group[r] = 3;       // group 3: 1 row, padded to 384
  for (GemmGrouping grouping : {GemmGrouping::single, GemmGrouping::contiguous, GemmGrouping::masked}) {
    GemmProblemView p;
    p.grouping = grouping;
    p.m = grouping == GemmGrouping::masked ? 150 : 448;
    p.n = 200;
    p.k_blocks = 7;
    p.split_k = 2;
    p.groups = grouping == GemmGrouping::single ? 1 : 4;
    p.row_group = row_group.data();
    p.masked_m = masked.data();
    std::set<std::tuple<u32, u32, u32, u32>> seen;  // (split, row0, col0, group)
    u32 computed = 0;
    for (u32 i = 0; i < S::tile_count(p); ++i) {
      const GemmTileWork w = S::work(p, i);
      EXPECT_TRUE(seen.insert({w.split, w.row0, w.col0, w.group}).second) << "tile visited twice";
      EXPECT_EQ(w.b_row0, w.group * p.n + w.col0);
      EXPECT_EQ(w.kb_end - w.kb_begin, w.split == 0 ? 3u : 4u);
      if (!w.skip) ++computed;
    }
    EXPECT_EQ(seen.size(), S::tile_count(p));
    const u32 col_tiles = 4;
    const u32 expected = grouping == GemmGrouping::single       ? 7 * col_tiles * 2
                         : grouping == GemmGrouping::contiguous ? (2 + 3 + 1) * col_tiles * 2  // tiles 0-1, 2-4, 5
                                                                : (3 + 0 + 1 + 1) * col_tiles * 2;
    EXPECT_EQ(computed, expected) << int(grouping);
  }
}

// Consecutive tiles walk a band of row tiles down one column tile before the next column.
TEST(Sm90GemmScheduler, RasterBandsShareAColumnTile) {
  using S = GemmTileScheduler<128, 128, 4>;
  GemmProblemView p;
  p.m = 128 * 10;
  p.n = 128 * 3;
  p.k_blocks = 1;
  std::vector<std::pair<u32, u32>> order;
  for (u32 i = 0; i < S::tile_count(p); ++i) order.push_back({S::work(p, i).row0 / 128, S::work(p, i).col0 / 128});
  ASSERT_EQ(order.size(), 30u);
  EXPECT_EQ(order[0], std::make_pair(0u, 0u));
  EXPECT_EQ(order[3], std::make_pair(3u, 0u));
  EXPECT_EQ(order[4], std::make_pair(0u, 1u));
  EXPECT_EQ(order[12], std::make_pair(4u, 0u));
  EXPECT_EQ(order[24], std::make_pair(8u, 0u));  // the last band has 2 row tiles
  EXPECT_EQ(order[25], std::make_pair(9u, 0u));
  EXPECT_EQ(order[26], std::make_pair(8u, 1u));
}

TEST(Sm90GemmPersistentModel, OneGemmAcrossFewerCtasThanTiles) {
  Case c = make_case<Bf16Plan64>(GemmGrouping::single, 200, 136, 320, {}, 1, false, 1);
  EXPECT_LT(run_error<Bf16Plan64>(c, 3, 11), 1e-2);  // 4 x 3 tiles on 3 CTAs, a 2-stage ring
  Case d = make_case<Bf16Plan128>(GemmGrouping::single, 257, 264, 448, {}, 1, false, 2);
  EXPECT_LT(run_error<Bf16Plan128>(d, 2, 12), 1e-2);
}

TEST(Sm90GemmPersistentModel, SplitKPartialsReduceInOrder) {
  Case c = make_case<Bf16Plan64>(GemmGrouping::single, 65, 72, 1024, {}, 3, false, 3);
  EXPECT_LT(run_error<Bf16Plan64>(c, 4, 13), 1e-2);
  Case s = make_case<E4m3Plan>(GemmGrouping::single, 130, 136, 1024, {}, 4, true, 4);
  EXPECT_LT(run_error<E4m3Plan>(s, 5, 14), 1e-2);
  // The reduction pass writes result rows only: padding rows of a grouped D keep their poison.
  std::vector<int> rows(192, -1);
  std::fill(rows.begin(), rows.begin() + 40, 0);
  std::fill(rows.begin() + 128, rows.begin() + 130, 1);
  Case g = make_case<Bf16Plan64>(GemmGrouping::contiguous, 192, 64, 512, rows, 2, false, 10);
  EXPECT_LT(run_error<Bf16Plan64>(g, 2, 19), 1e-2);
}

TEST(Sm90GemmPersistentModel, ContiguousGroupsLeavePaddingRowsUntouched) {
  // Segments start on a 128-row tile (DeepGEMM's alignment for this layout), each padded with -1
  // rows: group 0 rows 0-69, group 1 empty, group 2 rows 128-249, group 3 row 256, then padding.
  std::vector<int> rows(384, -1);
  std::fill(rows.begin(), rows.begin() + 70, 0);
  std::fill(rows.begin() + 128, rows.begin() + 250, 2);
  rows[256] = 3;
  Case c = make_case<Bf16Plan64>(GemmGrouping::contiguous, 384, 200, 256, rows, 1, false, 5);
  EXPECT_LT(run_error<Bf16Plan64>(c, 5, 15), 1e-2);
  Case s = make_case<E4m3Plan>(GemmGrouping::contiguous, 384, 200, 512, rows, 1, true, 6);
  EXPECT_LT(run_error<E4m3Plan>(s, 3, 16), 1e-2);
}

TEST(Sm90GemmPersistentModel, MaskedGroupsStopAtTheirValidRows) {
  Case c = make_case<Bf16Plan128>(GemmGrouping::masked, 150, 136, 192, {150, 0, 37, 1}, 1, false, 7);
  EXPECT_LT(run_error<Bf16Plan128>(c, 3, 17), 1e-2);
  Case s = make_case<E4m3Plan>(GemmGrouping::masked, 100, 256, 256, {100, 3}, 2, true, 8);
  EXPECT_LT(run_error<E4m3Plan>(s, 2, 18), 1e-2);
  // m = 100 of 128-row tiles, both groups full: group 0's second consumer holds rows 64-127, of
  // which 100-127 are group 1's valid rows. They must not leave in group 0's TMA box.
  Case full = make_case<Bf16Plan128>(GemmGrouping::masked, 100, 136, 192, {100, 100}, 1, false, 9);
  EXPECT_LT(run_error<Bf16Plan128>(full, 2, 19), 1e-2);
}

// Many schedules of a 2-stage ring carried over many short tiles: a stage freed too early or
// never would corrupt a result or deadlock.
TEST(Sm90GemmPersistentModel, RingCarriedAcrossTilesUnderRandomSchedules) {
  for (u32 seed = 20; seed < 26; ++seed) {
    Case c = make_case<Bf16Plan64>(GemmGrouping::single, 256, 128, 128, {}, 1, false, seed);
    EXPECT_LT(run_error<Bf16Plan64>(c, 1, seed), 1e-2);  // one CTA, 8 tiles of 2 K blocks
  }
}

TEST(Sm90GemmPersistentModel, BadProblemsAreErrors) {
  Case c = make_case<Bf16Plan64>(GemmGrouping::single, 64, 64, 128, {}, 1, false, 9);
  std::vector<u16> d(64 * 64);
  model::GemmOutput out;
  out.epilogue.d = d.data();
  out.rows = 64;
  using S = GemmTileScheduler<64, 64>;
  c.p.split_k = 3;  // K has 2 blocks
  EXPECT_NE(message_of([&] { model::gemm_persistent_model<Bf16Plan64, S>(c.a.bytes.data(), c.b.bytes.data(), c.p, 128, out, 1, 0); })
                .find("split_k = 3"),
            std::string::npos);
  c.p.split_k = 1;
  EXPECT_NE(message_of([&] { model::gemm_persistent_model<Bf16Plan64, S>(c.a.bytes.data(), c.b.bytes.data(), c.p, 128, out, 0, 0); })
                .find("needs a CTA"),
            std::string::npos);
}

}  // namespace
}  // namespace sol::kernels::sm90
