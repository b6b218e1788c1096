#pragma once
// Which tile of which GEMM a CTA computes next: the block decomposition of the persistent sm90
// GEMM (sm90_gemm_persistent.cuh) for one GEMM and for the two MoE grouped layouts DeepGEMM
// defines, with split-K. The kernel and its CPU model (model/sm90_gemm_model.h) both walk it, so
// a tile visited twice or never, or a padding row written, fails the model's test.
//
// Layouts (A and D row-major with K resp. N contiguous; B [groups * n, k], K-major):
//   single      A [m, k], B [n, k], D [m, n].
//   contiguous  the groups' rows of A concatenated, each group's segment starting on a multiple
//               of BlockM; row_group[r] is row r's group, or -1 for a padding row. D [m, n];
//               padding rows of D are left untouched. The layout is read on the device only: a
//               tile takes its group from its first row, and layout_row_ok is the rule the
//               kernel checks every row against (a row that breaks it is never computed).
//   masked      A [groups, m, k], D [groups, m, n]: group g has masked_m[g] valid rows (read on
//               the device, so the grid covers all m rows of every group and skips the rest).
// Order: the split is outermost; within it, a group's tiles in bands of RasterRows row tiles,
// a band walked column tile by column tile: CTAs running at once share the band's A rows and
// one column tile of B, which the L2 then serves instead of HBM.
// ClusterM = 2 (one GEMM only: grouped tiles may skip, which would break the pairs' lockstep):
// tile indices 2u and 2u + 1 are the two row tiles of unit u, vertically adjacent in one column
// tile and one split, so the two CTAs of a cluster (consecutive indices) share B's columns and K
// range; the units are ordered as the tiles above, in bands of RasterRows / 2 units.

#include "kernels/cuda/sm90/sm90_defs.h"
#include "kernels/cuda/sm90/sm90_fp8_promotion.h"
#include "kernels/cuda/sm90/sm90_gemm_epilogue.h"

namespace sol::kernels::sm90 {

enum class GemmGrouping : u32 { single = 0, contiguous = 1, masked = 2 };

struct GemmProblemView {
  GemmGrouping grouping = GemmGrouping::single;
  u32 m = 0;       // rows of A (single, contiguous) or rows per group (masked)
  u32 n = 0, k_blocks = 0;
  u32 groups = 1;
  u32 split_k = 1;
  const int* row_group = nullptr;  // contiguous
  const int* masked_m = nullptr;   // masked
};

struct GemmTileWork {
  u32 group = 0;
  u32 row0 = 0;    // first row of A and D (in the [groups * m] rows for masked)
  u32 col0 = 0;    // first column of D
  u32 b_row0 = 0;  // first row of B: group * n + col0
  u32 kb_begin = 0, kb_end = 0;
  u32 split = 0;
  bool skip = false;  // all padding (contiguous) or past masked_m (masked): nothing to compute
};

// The persistent kernel's argument block (one __grid_constant__ parameter), filled by the host
// launcher with the same layout the device reads.
struct PersistentGemmArgs {
  GemmProblemView problem;
  u32 rows = 0;                     // rows of A and D (groups * m for masked)
  // contiguous: where the kernel reports the first row breaking layout_row_ok, as
  // layout_error_key(row, value); the smallest key wins (atomicMin), kNoLayoutError when none.
  unsigned long long* layout_error = nullptr;
  GemmEpilogueParams epilogue;      // D and what is applied on the way to it
  float* workspace = nullptr;       // split_k > 1: [split_k][rows][n] f32
  const float* scales_a = nullptr;  // block-scaled fp8 only
  const float* scales_b = nullptr;
};

inline constexpr unsigned long long kNoLayoutError = ~0ull;
SOL_SM90_HD unsigned long long layout_error_key(u32 row, int value) {
  return (static_cast<unsigned long long>(row) << 32) | static_cast<u32>(value);
}
SOL_SM90_HD u32 layout_error_row(unsigned long long key) { return u32(key >> 32); }
SOL_SM90_HD int layout_error_value(unsigned long long key) { return int(u32(key & 0xFFFFFFFFull)); }

template <u32 BlockM, u32 BlockN, u32 RasterRows = 8, u32 ClusterM = 1>
struct GemmTileScheduler {
  static_assert(RasterRows >= 1, "a raster band has a row tile");
  static_assert(ClusterM == 1 || ClusterM == 2, "clusters of one or two vertically adjacent tiles");
  static constexpr u32 block_m = BlockM;
  static constexpr u32 cluster_m = ClusterM;
  static constexpr u32 band_units = RasterRows / ClusterM > 0 ? RasterRows / ClusterM : 1;

  SOL_SM90_HD static u32 m_tiles(const GemmProblemView& p) { return (p.m + BlockM - 1) / BlockM; }
  // Units of ClusterM row tiles (the plan asks m_tiles to be a multiple of ClusterM).
  SOL_SM90_HD static u32 m_units(const GemmProblemView& p) { return (m_tiles(p) + ClusterM - 1) / ClusterM; }
  SOL_SM90_HD static u32 n_tiles(const GemmProblemView& p) { return (p.n + BlockN - 1) / BlockN; }
  SOL_SM90_HD static u32 planes(const GemmProblemView& p) {
    return p.grouping == GemmGrouping::masked ? p.groups : 1u;
  }
  SOL_SM90_HD static u32 tiles_per_split(const GemmProblemView& p) {
    return planes(p) * m_units(p) * ClusterM * n_tiles(p);
  }
  SOL_SM90_HD static u32 tile_count(const GemmProblemView& p) { return tiles_per_split(p) * p.split_k; }

  SOL_SM90_HD static GemmTileWork work(const GemmProblemView& p, u32 index) {
    GemmTileWork w;
    const u32 rank = index % ClusterM, unit = index / ClusterM;
    const u32 per_split = tiles_per_split(p) / ClusterM, per_plane = m_units(p) * n_tiles(p);
    w.split = unit / per_split;
    const u32 in_split = unit % per_split;
    const u32 plane = in_split / per_plane, t = in_split % per_plane;
    // Bands of band_units units; the last band may be shorter.
    const u32 band_tiles = band_units * n_tiles(p), band = t / band_tiles, in_band = t % band_tiles;
    const u32 band_rows = m_units(p) - band * band_units < band_units ? m_units(p) - band * band_units : band_units;
    const u32 mt = (band * band_units + in_band % band_rows) * ClusterM + rank, nt = in_band / band_rows;
    w.col0 = nt * BlockN;
    w.kb_begin = u32(u64(p.k_blocks) * w.split / p.split_k);
    w.kb_end = u32(u64(p.k_blocks) * (w.split + 1) / p.split_k);
    if (p.grouping == GemmGrouping::masked) {
      w.group = plane;
      w.row0 = plane * p.m + mt * BlockM;
      w.skip = int(mt * BlockM) >= p.masked_m[plane];
    } else {
      w.row0 = mt * BlockM;
      if (p.grouping == GemmGrouping::contiguous) {
        // An id outside [0, groups) (padding, or a bad layout the check reports) computes
        // nothing: B's rows and scales are never indexed with it.
        const int g = p.row_group[w.row0];
        w.skip = !group_in_range(p, g);
        w.group = w.skip ? 0u : u32(g);
      }
    }
    w.b_row0 = w.group * p.n + w.col0;
    w.skip = w.skip || w.kb_begin == w.kb_end;
    return w;
  }

  SOL_SM90_HD static bool group_in_range(const GemmProblemView& p, int g) { return g >= 0 && u32(g) < p.groups; }

  // The contiguous layout's rule for row `row` (< m), which the kernel checks on every row: its
  // value is -1 (padding) or the group of its BlockM-row block's first row, and that group is
  // one of B's. So a block is one group's rows and padding, in any order after its first row;
  // a group's first block starts with one of its rows. DeepGEMM asks the same (each group
  // padded to a multiple of 128 rows); an aligned run of 128 satisfies both BlockM of 64 and 128.
  SOL_SM90_HD static bool layout_row_ok(const GemmProblemView& p, u32 row) {
    const int v = p.row_group[row];
    return v == -1 || (v == p.row_group[row / BlockM * BlockM] && group_in_range(p, v));
  }

  // One lane's share of the layout check of CTA `cta` of `ctas`: row blocks cta, cta + ctas, ...,
  // rows lane, lane + 32, ... of each; the first row it finds breaking layout_row_ok, as
  // layout_error_key (kNoLayoutError: none). Over 32 lanes and every CTA, each row once.
  SOL_SM90_HD static unsigned long long layout_check_lane(const GemmProblemView& p, u32 cta, u32 ctas, u32 lane) {
    for (u32 mb = cta; mb < m_tiles(p); mb += ctas)
      for (u32 row = mb * BlockM + lane; row < p.m && row < (mb + 1) * BlockM; row += 32)
        if (!layout_row_ok(p, row)) return layout_error_key(row, p.row_group[row]);
    return kNoLayoutError;
  }

  // Whether row `row` of D is a result at all: inside D, not a padding row (contiguous), within
  // its group's valid rows (masked). The split-K reduction writes exactly these rows.
  SOL_SM90_HD static bool row_valid(const GemmProblemView& p, u32 row) {
    switch (p.grouping) {
      case GemmGrouping::single: return row < p.m;
      // A row breaking the layout rule is no one's (its block's tile computes another group or
      // nothing), so the split-K reduction must not write it either.
      case GemmGrouping::contiguous: return row < p.m && p.row_group[row] != -1 && layout_row_ok(p, row);
      case GemmGrouping::masked: return row / p.m < p.groups && int(row % p.m) < p.masked_m[row / p.m];
    }
    return false;
  }

  // Whether tile `w`'s epilogue writes row `row`: a valid row of the tile's own group (a tile's
  // rows past its group's end belong to no one, or to the next group's tiles).
  SOL_SM90_HD static bool row_stored(const GemmProblemView& p, const GemmTileWork& w, u32 row) {
    if (!row_valid(p, row)) return false;
    switch (p.grouping) {
      case GemmGrouping::single: return true;
      case GemmGrouping::contiguous: return p.row_group[row] == int(w.group);
      case GemmGrouping::masked: return row / p.m == w.group;
    }
    return false;
  }

  // Whether row `row` may lie in a TMA store box of tile `w` (sm90_gemm_store.h): a row the tile
  // stores, or one past D's `rows`, which the store clips. A consumer stores its 64 rows by TMA
  // only when every one of them may.
  SOL_SM90_HD static bool row_tma_storable(const GemmProblemView& p, const GemmTileWork& w, u32 row, u32 rows) {
    return row >= rows || row_stored(p, w, row);
  }

  // The fp8 B scale of column `col` of D in K block `kb`: B's scales are [groups, ceil(n / 128),
  // k_blocks], one per 128 x 128 block of each group's weights (DeepGEMM's layout).
  SOL_SM90_HD static u64 scale_b_index(const GemmProblemView& p, const GemmTileWork& w, u32 col, u32 kb) {
    const u64 blocks_per_group = (p.n + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
    return u64(w.group) * blocks_per_group * p.k_blocks + fp8_scale_b_index(col, kb, p.k_blocks);
  }
};

}  // namespace sol::kernels::sm90
