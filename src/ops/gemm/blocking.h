#pragma once
// Cache blocking of the AVX-512 GEMM (BLIS loop order: NC -> KC -> MC -> NR -> MR).
//
// KC and the decode chunk fix the summation order: a tile's accumulators start at zero in
// every K block (or chunk) and are added to the running sums after it (kernels/x86/avx512/
// gemm_tile_avx512.h: loading the sums up front stalls the FMAs), so D is a sum of per-block
// sums. They are therefore constants, the same on every machine, and never tuning: a GEMM's
// bits must not depend on which machine or which tuning computed it (tests/hw/
// test_tuning_bits.cc caught KC and the chunk changing bits when they were tunable).
// MC and NC only decide which rows and columns are packed together: they come from the tuning
// context (sol/tuning.h, defaults from the caches, or what `sol tune` measured fastest here).
// docs/perf/gemm.md and docs/perf/tuning.md have the measurements.
#include <algorithm>
#include <cstdint>

#include "kernels/gemm.h"
#include "sol/dtype.h"
#include "sol/tuning.h"

namespace sol::gemm_detail {

// Decode (M <= 16, KC = all of K) runs each panel's tiles in K chunks of this many steps, so
// that a panel's chunk (256 KiB at 128 bytes a step) and the next panel's requested chunk both
// stay in a 1 MiB L2 (gemm_blocked.cc).
inline constexpr int64_t kDecodeChunkSteps = 2048;

struct Blocking {
  int64_t kc = 0;  // K per block (even for bf16)
  int64_t mc = 0;  // rows of A packed per block (a multiple of kGemmMR)
  int64_t nc = 0;  // columns of B per block (a multiple of kGemmNR)
};

// KC: long (2048 K values; 4096 for int8). Every K block ends with a round trip of the tile's
//     24 partial-sum vectors (to D or a workspace, and back), and that costs more than keeping
//     the B micro-panel in L1: the panel (128-256 KiB) streams from L2 well within its bandwidth.
// MC: tuning().params.gemm_mc rows of A per packed block where a row of the block is 4 KiB (4
//     bytes a K step: bf16 pairs, int8 quads); where it is twice that (f32, whose 2048 K
//     values are 2048 steps, or bf16 widened to f32 pairs for an FMA tile), half as many rows,
//     so the block keeps the bytes the default sizes to L2.
// NC: tuning().params.gemm_nc columns: the packed B block (KC x NC) lives in L3 and is packed
//     once per (NC, KC) block; every A block is packed once per NC columns, so a wide NC makes
//     A packing negligible (2 * NC FLOPs per packed element).
// Skinny M (<= 16 rows in all, decode): B is streamed from DRAM once and reused only by the
//     <= 2 A panels, so KC = all of K: each 32-column panel of a packed B is then one
//     contiguous run and the panels follow each other, a single sequential stream for the
//     hardware prefetcher. NC = 64 keeps a plain B packed on the fly in L2 (K x 64 elements)
//     between packing and use.
// Partial sums outside D (bf16 output, or C = D in place) take an M x NC f32 workspace per
//     thread; NC shrinks until it is at most 4 MiB.
// NC is then evened out over the columns: 2112 columns run as one block of 2112, not as
//     2048 + 64 (which packs all of A a second time for 3% of the work).
// m_total decides KC (and so the summation order) from the whole problem, never from a
// thread's share; m_rows and n_cols are the calling thread's block; a_step_row_bytes is what a K
// step of the packed A takes per row (4, or 8 for f32 pairs).
inline Blocking choose_blocking(const TuningParams& tune, DType in, int64_t m_total, int64_t m_rows,
                                int64_t n_cols, int64_t k, bool partials_in_workspace, int64_t a_step_row_bytes) {
  using kernels::kGemmMR;
  using kernels::kGemmNR;
  Blocking b;
  const bool skinny = m_total <= 16;
  b.kc = skinny ? std::max<int64_t>(4, (k + 3) / 4 * 4) : in == DType::i8 ? 4096 : 2048;
  const int64_t full_kc = in == DType::i8 ? 4096 : 2048;
  const int64_t a_row_bytes = full_kc / (in == DType::f32 ? 1 : in == DType::i8 ? 4 : 2) * a_step_row_bytes;
  b.mc = std::max<int64_t>(kGemmMR, tune.gemm_mc * 4096 / a_row_bytes / kGemmMR * kGemmMR);
  b.nc = skinny ? 64 : tune.gemm_nc;
  if (partials_in_workspace && k > b.kc) {
    const int64_t fit = (int64_t(4) << 20) / (4 * std::max<int64_t>(m_rows, 1));
    b.nc = std::clamp<int64_t>(fit / kGemmNR * kGemmNR, kGemmNR, b.nc);
  }
  const int64_t blocks = std::max<int64_t>(1, n_cols / b.nc);
  b.nc = (n_cols + blocks - 1) / blocks;
  b.nc = std::max<int64_t>(kGemmNR, (b.nc + kGemmNR - 1) / kGemmNR * kGemmNR);
  static_assert(48 % kGemmMR == 0 && 32 % kGemmNR == 0 && 64 % kGemmNR == 0,
                "tuning_param_infos() keeps MC a multiple of 48 and NC of 32");
  return b;
}

}  // namespace sol::gemm_detail
