#pragma once
// Physical layouts of tiles on the CPU target, shared by scratch planning and code generation.
//   row        row-major, dense
//   packed_a   the micro-kernel's A panels: ceil(M / 12) panels of 12 rows, K-major inside a
//              panel; bf16 in (k, k+1) pairs (src/kernels/gemm.h). The tile is op(A) = [M, K].
//   packed_at  the same panels, for a tile stored as [K, M] (gemm trans_a)
//   packed_b   the micro-kernel's B panels: ceil(N / 32) panels of 32 columns, K-major. [K, N]
//   packed_bt  the same panels, for a tile stored as [N, K] (gemm trans_b)
// K is padded to a whole pair for bf16; padding rows, columns and K are zero.
// A bf16 A tile marked `widened` (infer-layouts, from the target) holds each pair as two f32
// instead: per step a panel's first values, then its second ones, 8 bytes per row; the last
// panel has only the tile's remaining rows (rows % 12), as the tile kernel of that many rows
// reads it (the FMA variant's panels, src/kernels/gemm.h).
#include <cstdint>
#include <string>

#include "sol/tile_ir.h"

namespace sol::tile {

inline constexpr int64_t kPanelRows = 12;  // kernels::kGemmMR
inline constexpr int64_t kPanelCols = 32;  // kernels::kGemmNR

// Budgets the verifier holds every program to. A cell's tiles live in one per-thread arena on
// the CPU (a CUDA cell's in shared memory, checked again by its code generator against the
// 227 KiB of a Hopper block); 64 MiB is far above any useful tile set and keeps tile_bytes()
// and the arena's offsets far from overflow. Unrolling copies statements, so its trip counts
// and the statements it makes are bounded too.
inline constexpr int64_t kMaxCellBytes = int64_t(64) << 20;
inline constexpr int64_t kMaxUnrollTrips = 1024;
inline constexpr int64_t kMaxStatements = int64_t(1) << 16;

inline std::string layout_of(const Stmt& alloc) {
  auto it = alloc.attrs.find("layout");
  return it == alloc.attrs.end() ? "row" : it->second;
}

struct PanelGeometry {
  int64_t rows = 0, k = 0;  // op(tile) rows (M or N) and K
  int64_t panel = 0;        // panel width: 12 (A) or 32 (B)
  int64_t k_steps = 0;      // K in micro-kernel steps (pairs for bf16)
  bool widened = false;     // bf16 pairs held as two f32
  int64_t panels() const { return (rows + panel - 1) / panel; }
  int64_t row_step_bytes() const { return widened ? 8 : 4; }  // a step of one row
  // A whole panel; panel p starts at p * panel_bytes() (a widened last panel is shorter).
  int64_t panel_bytes() const { return panel * k_steps * row_step_bytes(); }
  int64_t bytes() const { return widened ? rows * k_steps * 8 : panels() * panel_bytes(); }
};

inline PanelGeometry panel_geometry(const Stmt& alloc) {
  const std::string l = layout_of(alloc);
  const bool a = l == "packed_a" || l == "packed_at";
  const bool t = l == "packed_at" || l == "packed_bt";
  PanelGeometry g;
  // packed_a [M, K], packed_at [K, M], packed_b [K, N], packed_bt [N, K]
  g.rows = a ? alloc.shape[t ? 1 : 0] : alloc.shape[t ? 0 : 1];
  g.k = a ? alloc.shape[t ? 0 : 1] : alloc.shape[t ? 1 : 0];
  g.panel = a ? kPanelRows : kPanelCols;
  g.k_steps = alloc.dtype == DType::bf16 ? (g.k + 1) / 2 : g.k;
  g.widened = alloc.attrs.count("widened") != 0;
  return g;
}

inline int64_t tile_bytes(const Stmt& alloc) {
  if (layout_of(alloc) != "row") {
    return panel_geometry(alloc).bytes();
  }
  int64_t n = int64_t(dtype_size(alloc.dtype));
  for (int64_t d : alloc.shape) n *= d;
  return n;
}

}  // namespace sol::tile
