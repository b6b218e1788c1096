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
// are no result must still hold the poison. `groups`: each row's expected group (-1: no result)
// where it differs from the layout's (a bad contiguous layout); `layout_error`: the model's
// layout report, kNoLayoutError before.
template <class Plan>
double run_error(Case& c, u32 ctas, u32 seed, const std::vector<int>* groups = nullptr,
                 unsigned long long* layout_error = nullptr) {
  using Scheduler = GemmTileScheduler<Plan::block_m, Plan::block_n, 2, Plan::cluster_m>;
  std::vector<u16> d(u64(c.rows) * c.p.n, kPoison);
  std::vector<float> workspace(c.p.split_k > 1 ? u64(c.p.split_k) * c.rows * c.p.n : 0, -1.0f);
  model::GemmOutput out;
  out.epilogue.d = d.data();
  out.workspace = workspace.empty() ? nullptr : workspace.data();
  out.rows = c.rows;
  std::vector<u32> writes(u64(c.rows) * c.p.n, 0);
  out.writes = &writes;
  unsigned long long report = kNoLayoutError;
  out.layout_error = layout_error ? layout_error : &report;
  const bool scaled = !c.sa.empty();
  model::gemm_persistent_model<Plan, Scheduler>(c.a.bytes.data(), c.b.bytes.data(), c.p, c.k, out, ctas, seed,
                                                scaled ? c.sa.data() : nullptr, scaled ? c.sb.data() : nullptr);
  double err = 0, ref = 0;
  const u32 n = c.p.n;
  u32 wrong_writes = 0;
  for (u32 row = 0; row < c.rows; ++row) {
    const int g = groups ? (*groups)[row] : group_of(c, row);
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
  if (!layout_error) {
    EXPECT_EQ(report, kNoLayoutError) << "a good layout reported at row " << layout_error_row(report);
  }
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

// With B multicast, tile indices 2u and 2u + 1 (the two CTAs of a cluster) are vertically
// adjacent tiles of one column tile, split and K range, and every tile still comes once.
TEST(Sm90GemmScheduler, ClusterPairsShareBAndKRange) {
  using S = GemmTileScheduler<128, 128, 4, 2>;
  GemmProblemView p;
  p.m = 128 * 10;
  p.n = 128 * 3 - 8;
  p.k_blocks = 9;
  p.split_k = 2;
  ASSERT_EQ(S::tile_count(p), 10u * 3 * 2);
  std::set<std::tuple<u32, u32, u32>> seen;
  for (u32 i = 0; i < S::tile_count(p); i += 2) {
    const GemmTileWork lo = S::work(p, i), hi = S::work(p, i + 1);
    EXPECT_EQ(lo.row0 % 256, 0u) << i;
    EXPECT_EQ(hi.row0, lo.row0 + 128) << i;
    EXPECT_EQ(hi.col0, lo.col0);
    EXPECT_EQ(hi.b_row0, lo.b_row0);
    EXPECT_EQ(hi.split, lo.split);
    EXPECT_EQ(hi.kb_begin, lo.kb_begin);
    EXPECT_EQ(hi.kb_end, lo.kb_end);
    for (const GemmTileWork& w : {lo, hi}) EXPECT_TRUE(seen.insert({w.split, w.row0, w.col0}).second) << "twice";
  }
  EXPECT_EQ(seen.size(), S::tile_count(p));
  // Units in bands of RasterRows / 2 = 2 pairs, walked down a column tile first.
  EXPECT_EQ(S::work(p, 2).row0, 256u);
  EXPECT_EQ(S::work(p, 2).col0, 0u);
  EXPECT_EQ(S::work(p, 4).row0, 0u);
  EXPECT_EQ(S::work(p, 4).col0, 128u);
}

using Bf16Cluster = GemmTilePlan<128, 128, 3, 2, 2, OperandMajor::k, 2>;
using E4m3Cluster = GemmTilePlan<128, 128, 4, 2, 1, OperandMajor::k, 2>;

TEST(Sm90GemmPlan, ClusterSlicesFillTheBStage) {
  static_assert(Bf16Cluster::b_box_outer == 64 && Bf16Cluster::b_boxes == 1);
  static_assert(Bf16Cluster::b_box_offset(1, 0, 1) == Bf16Cluster::b_offset(1) + 64 * 128);
  static_assert(Bf16Cluster::b_box_c1(0, 256, 0, 1) == 256 + 64);
  static_assert(Bf16Cluster::empty_arrivals == 4 && Bf16Cluster::multicast_mask == 3);
  static_assert(Bf16Cluster::tx_bytes == Bf16Plan128::tx_bytes, "each CTA still receives the whole stage");
  SUCCEED();
}

// Two CTAs of a cluster run together at random: each loads half of every B stage into both
// rings and frees a stage on both; results as without multicast, each written once.
TEST(Sm90GemmPersistentModel, MulticastClustersShareBStages) {
  for (u32 seed = 70; seed < 74; ++seed) {
    Case c = make_case<Bf16Cluster>(GemmGrouping::single, 512, 264, 448, {}, 1, false, seed);
    EXPECT_LT(run_error<Bf16Cluster>(c, 4, seed), 1e-2) << seed;  // 4 x 3 tiles on two clusters
  }
  Case odd = make_case<Bf16Cluster>(GemmGrouping::single, 250, 136, 320, {}, 1, false, 75);  // rows past m in a tile
  EXPECT_LT(run_error<Bf16Cluster>(odd, 2, 76), 1e-2);
  Case split = make_case<Bf16Cluster>(GemmGrouping::single, 256, 72, 1024, {}, 3, false, 77);
  EXPECT_LT(run_error<Bf16Cluster>(split, 4, 78), 1e-2);
  Case fp8 = make_case<E4m3Cluster>(GemmGrouping::single, 512, 256, 640, {}, 1, true, 79);
  EXPECT_LT(run_error<E4m3Cluster>(fp8, 2, 80), 1e-2);  // 4 x 2 tiles on one cluster
  Case fp8_split = make_case<E4m3Cluster>(GemmGrouping::single, 256, 136, 1024, {}, 2, true, 81);
  EXPECT_LT(run_error<E4m3Cluster>(fp8_split, 4, 82), 1e-2);
}

TEST(Sm90GemmPersistentModel, ClusterGridIsWholeClustersOfOneGemm) {
  Case c = make_case<Bf16Cluster>(GemmGrouping::single, 256, 64, 128, {}, 1, false, 83);
  EXPECT_NE(message_of([&] { run_error<Bf16Cluster>(c, 3, 84); }).find("whole clusters"), std::string::npos);
  Case g = make_case<Bf16Cluster>(GemmGrouping::masked, 256, 64, 128, {100}, 1, false, 85);
  EXPECT_NE(message_of([&] { run_error<Bf16Cluster>(g, 2, 86); }).find("is for one GEMM"), std::string::npos);
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

// A contiguous layout of `m` rows: `runs` of (first row, rows, group), -1 elsewhere.
std::vector<int> contiguous_layout(u32 m, std::initializer_list<std::tuple<u32, u32, int>> runs) {
  std::vector<int> rows(m, -1);
  for (const auto& [first, count, g] : runs) std::fill(rows.begin() + first, rows.begin() + first + count, g);
  return rows;
}

// The whole grid's layout report: every CTA's 32 lanes, lowered as the kernel's atomicMin.
template <class S>
unsigned long long layout_report(const std::vector<int>& rows, u32 groups, u32 ctas) {
  GemmProblemView p;
  p.grouping = GemmGrouping::contiguous;
  p.m = u32(rows.size());
  p.n = 64;
  p.k_blocks = 1;
  p.groups = groups;
  p.row_group = rows.data();
  unsigned long long key = kNoLayoutError;
  for (u32 cta = 0; cta < ctas; ++cta)
    for (u32 lane = 0; lane < 32; ++lane) key = std::min(key, S::layout_check_lane(p, cta, ctas, lane));
  return key;
}

// The layout check reports the first row breaking the rule (its value -1 or its block's first
// row's group, that group one of B's), the same on any grid; good layouts report nothing.
TEST(Sm90GemmScheduler, ContiguousLayoutCheckFindsTheFirstBadRow) {
  using S64 = GemmTileScheduler<64, 64>;
  using S128 = GemmTileScheduler<128, 64>;
  // Padding, an empty group 1, group 2 over four 128-row blocks, group 3 and then a padding-only
  // 64-row block, group 4 in the last, partial block (m = 805).
  const std::vector<int> good =
      contiguous_layout(805, {{0, 100, 0}, {128, 512, 2}, {640, 17, 3}, {768, 37, 4}});
  for (u32 ctas : {1u, 3u, 7u, 200u}) {
    EXPECT_EQ(layout_report<S64>(good, 5, ctas), kNoLayoutError) << ctas;
    EXPECT_EQ(layout_report<S128>(good, 5, ctas), kNoLayoutError) << ctas;
  }
  // Padding between a block's group rows is allowed: the block is still one group's.
  std::vector<int> holes = good;
  holes[130] = holes[131] = -1;
  EXPECT_EQ(layout_report<S128>(holes, 5, 3), kNoLayoutError);
  const auto at = [](u32 row, int value) { return layout_error_key(row, value); };
  for (u32 ctas : {1u, 5u, 200u}) {
    // Group 1 starting at row 64: a 64-row tile's start, inside a 128-row tile.
    const std::vector<int> at64 = contiguous_layout(256, {{0, 64, 0}, {64, 100, 1}});
    EXPECT_EQ(layout_report<S64>(at64, 2, ctas), kNoLayoutError);
    EXPECT_EQ(layout_report<S128>(at64, 2, ctas), at(64, 1));
    // A run starting mid-tile for both heights.
    const std::vector<int> at100 = contiguous_layout(256, {{0, 100, 0}, {100, 100, 1}});
    EXPECT_EQ(layout_report<S64>(at100, 2, ctas), at(100, 1));
    EXPECT_EQ(layout_report<S128>(at100, 2, ctas), at(100, 1));
    // A block opening with padding, then a group's rows.
    const std::vector<int> late = contiguous_layout(384, {{0, 30, 0}, {140, 116, 2}});
    EXPECT_EQ(layout_report<S128>(late, 3, ctas), at(140, 2));
    // Values outside [-1, groups): the smallest bad row wins over a later misalignment.
    std::vector<int> range = good;
    range[700] = 5;
    range[300] = -2;
    range[200] = 3;  // inside group 2's block: misaligned, and the first
    EXPECT_EQ(layout_report<S128>(range, 5, ctas), at(200, 3));
    range[200] = 2;
    EXPECT_EQ(layout_report<S128>(range, 5, ctas), at(300, -2));
    range[300] = 2;
    EXPECT_EQ(layout_report<S128>(range, 5, ctas), at(700, 5));
    // The last, partial block.
    std::vector<int> tail = good;
    tail[804] = 3;
    EXPECT_EQ(layout_report<S64>(tail, 5, ctas), at(804, 3));
  }
}

// The tiles of a contiguous layout: a block's group is its first row's; padding-only blocks and
// first rows outside [0, groups) compute nothing (B and its scales are never indexed with them);
// rows breaking the rule are no result, so neither a tile nor the split-K reduction writes them.
TEST(Sm90GemmScheduler, ContiguousTilesFollowEachBlocksFirstRow) {
  using S = GemmTileScheduler<128, 64, 2>;
  std::vector<int> rows = contiguous_layout(805, {{0, 100, 0}, {128, 512, 2}, {640, 17, 3}, {768, 37, 4}});
  GemmProblemView p;
  p.grouping = GemmGrouping::contiguous;
  p.m = 805;
  p.n = 128;
  p.k_blocks = 4;
  p.split_k = 2;
  p.groups = 5;
  p.row_group = rows.data();
  const auto tiles_of_block = [&](u32 block, int& group) {
    u32 computed = 0;
    for (u32 i = 0; i < S::tile_count(p); ++i) {
      const GemmTileWork w = S::work(p, i);
      if (w.row0 != block * 128) continue;
      EXPECT_EQ(w.b_row0, w.group * p.n + w.col0);
      if (!w.skip) ++computed, group = int(w.group);
    }
    return computed;
  };
  const std::pair<u32, int> blocks[] = {{0, 0}, {1, 2}, {2, 2}, {3, 2}, {4, 2}, {5, 3}, {6, 4}};
  for (const auto& [block, want] : blocks) {
    int group = -1;
    EXPECT_EQ(tiles_of_block(block, group), 2u * 2u) << "block " << block;  // 2 column tiles x 2 splits
    EXPECT_EQ(group, want) << "block " << block;
  }
  EXPECT_EQ(S::m_tiles(p), 7u);
  EXPECT_TRUE(S::row_valid(p, 99));
  EXPECT_FALSE(S::row_valid(p, 100));  // padding
  EXPECT_TRUE(S::row_valid(p, 804));   // the last, partial block
  EXPECT_FALSE(S::row_valid(p, 805));  // past D
  EXPECT_FALSE(S::row_valid(p, 700));  // padding-only stretch of group 3's block
  // A padding-only block.
  std::vector<int> padded = rows;
  std::fill(padded.begin() + 640, padded.begin() + 768, -1);
  p.row_group = padded.data();
  int group = -1;
  EXPECT_EQ(tiles_of_block(5, group), 0u);
  // A block whose first row is out of range computes nothing and none of its rows is a result.
  std::vector<int> bad = rows;
  bad[128] = 9;
  p.row_group = bad.data();
  EXPECT_EQ(tiles_of_block(1, group), 0u);
  EXPECT_FALSE(S::row_valid(p, 128));
  EXPECT_FALSE(S::row_valid(p, 129));  // group 2, but its block's tile is not group 2's
  bad[128] = 2;
  bad[200] = 3;  // misaligned row inside group 2's block
  EXPECT_FALSE(S::row_valid(p, 200));
  EXPECT_TRUE(S::row_valid(p, 201));
  GemmTileWork w;
  w.row0 = 128;
  w.group = 2;
  EXPECT_FALSE(S::row_stored(p, w, 200));
  EXPECT_TRUE(S::row_stored(p, w, 201));
}

// Many blocks per group, empty groups, padding-only blocks and a last, partial block through
// the model: every result once, padding untouched, no report.
TEST(Sm90GemmPersistentModel, ContiguousGroupsOverManyBlocksAndAPartialLastBlock) {
  const std::vector<int> rows = contiguous_layout(805, {{0, 100, 0}, {128, 512, 2}, {640, 17, 3}, {768, 37, 4}});
  Case c = make_case<Bf16Plan64>(GemmGrouping::contiguous, 805, 72, 128, rows, 1, false, 40);
  EXPECT_LT(run_error<Bf16Plan64>(c, 7, 41), 1e-2);
  Case s = make_case<E4m3Plan>(GemmGrouping::contiguous, 805, 136, 256, rows, 2, true, 42);
  EXPECT_LT(run_error<E4m3Plan>(s, 5, 43), 1e-2);
}

// A bad layout through the model: the rows breaking the rule (and a block whose first row is
// out of range, whole) keep their poison, with split-K too; every other row is right; the
// report names the first bad row.
TEST(Sm90GemmPersistentModel, BadContiguousLayoutsLeaveTheirRowsAndAreReported) {
  // Group 1 starts at row 64: good for 64-row tiles, bad for 128.
  const std::vector<int> at64 = contiguous_layout(256, {{0, 64, 0}, {64, 100, 1}, {164, 20, 1}});
  {
    Case c = make_case<Bf16Plan64>(GemmGrouping::contiguous, 256, 72, 128, at64, 1, false, 50);
    EXPECT_LT(run_error<Bf16Plan64>(c, 3, 51), 1e-2);
  }
  std::vector<int> expected = at64;
  std::fill(expected.begin() + 64, expected.begin() + 128, -1);  // rows 128.. are their own block's
  for (u32 split : {1u, 2u}) {
    Case c = make_case<Bf16Plan128>(GemmGrouping::contiguous, 256, 136, 256, at64, split, false, 52 + split);
    unsigned long long report = kNoLayoutError;
    EXPECT_LT(run_error<Bf16Plan128>(c, 3, 54, &expected, &report), 1e-2) << split;
    EXPECT_EQ(report, layout_error_key(64, 1)) << split;
  }
  // Values outside [-1, groups): a bad first row drops its whole block; another bad row only itself.
  std::vector<int> range = contiguous_layout(384, {{0, 128, 0}, {128, 200, 1}});
  range[5] = 7;
  range[256] = -3;
  std::vector<int> keep = range;
  keep[5] = -1;
  std::fill(keep.begin() + 256, keep.begin() + 384, -1);
  Case s = make_case<E4m3Plan>(GemmGrouping::contiguous, 384, 136, 256, contiguous_layout(384, {{0, 128, 0}, {128, 200, 1}}),
                               1, true, 60);
  s.row_group = range;
  s.p.row_group = s.row_group.data();
  unsigned long long report = kNoLayoutError;
  EXPECT_LT(run_error<E4m3Plan>(s, 2, 61, &keep, &report), 1e-2);
  EXPECT_EQ(report, layout_error_key(5, 7));
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

// The block-scaled 128 x 192 tile: a tile spans two of B's 128-column scale blocks, starting on
// one (col0 a multiple of 384) or half way into one; ragged N puts the second block past B's
// last. One GEMM, both grouped layouts, split-K and B multicast.
using E4m3Plan192 = GemmTilePlan<128, 192, 3, 2, 1>;
using E4m3Cluster192 = GemmTilePlan<128, 192, 3, 2, 1, OperandMajor::k, 2>;

TEST(Sm90GemmPersistentModel, Fp8TilesOfTwoScaleBlocks) {
  Case one = make_case<E4m3Plan192>(GemmGrouping::single, 200, 520, 384, {}, 1, true, 90);  // col0 0, 192, 384
  EXPECT_LT(run_error<E4m3Plan192>(one, 3, 91), 1e-2);
  Case split = make_case<E4m3Plan192>(GemmGrouping::single, 130, 264, 1024, {}, 2, true, 92);
  EXPECT_LT(run_error<E4m3Plan192>(split, 4, 93), 1e-2);
  const std::vector<int> rows = contiguous_layout(384, {{0, 100, 0}, {128, 200, 2}});
  Case contiguous = make_case<E4m3Plan192>(GemmGrouping::contiguous, 384, 392, 256, rows, 1, true, 94);
  EXPECT_LT(run_error<E4m3Plan192>(contiguous, 3, 95), 1e-2);
  Case masked = make_case<E4m3Plan192>(GemmGrouping::masked, 100, 200, 256, {100, 3}, 1, true, 96);
  EXPECT_LT(run_error<E4m3Plan192>(masked, 2, 97), 1e-2);
  Case pairs = make_case<E4m3Cluster192>(GemmGrouping::single, 256, 392, 512, {}, 1, true, 98);
  EXPECT_LT(run_error<E4m3Cluster192>(pairs, 4, 99), 1e-2);
}

// Which registers take the second scale block (fp8_reg_in_second_block, the kernel's choice per
// register) against the columns they hold, for every tile start a 128 or 192 tile has, and the
// second block's column (fp8_second_block_col) inside that block or clamped into D.
TEST(Sm90GemmPersistentModel, Fp8RegistersFindTheirScaleBlock) {
  for (u32 col0 = 0; col0 < 8 * 384; col0 += 64) {
    if (col0 % 128 != 0 && col0 % 192 != 0) continue;  // no tile starts there
    const u32 first = fp8_first_block_cols(col0);
    EXPECT_TRUE(first == 128 || first == 64) << col0;
    for (u32 t = 0; t < 128; ++t)
      for (u32 i = 0; i < 96; ++i) {
        const u32 col = col0 + accum_col(t, i);
        ASSERT_EQ(fp8_reg_in_second_block(i, first), col / 128 != col0 / 128) << col0 << " " << t << " " << i;
        if (fp8_reg_in_second_block(i, first)) {
          ASSERT_EQ(col / 128, col0 / 128 + 1) << "a third block";
        }
      }
    EXPECT_EQ(fp8_second_block_col(col0, 1u << 20) / 128, col0 / 128 + 1);
    EXPECT_EQ(fp8_second_block_col(col0, col0 + 8), col0 + 7);  // past D: D's last column
  }
}

}  // namespace
}  // namespace sol::kernels::sm90
