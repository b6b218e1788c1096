#pragma once
// Cache blocking of the AVX-512 GEMM (BLIS loop order: NC -> KC -> MC -> NR -> MR).
// Sizes are for this machine's cores (Zen 5: L1d 48 KiB, L2 1 MiB per core, L3 32 MiB shared);
// docs/perf/gemm.md has the measurements behind them.
#include <algorithm>
#include <cstdint>

#include "kernels/gemm.h"
#include "sol/dtype.h"

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

// KC: long. Every K block ends with a round trip of the tile's 24 partial-sum vectors (to D or
//     a workspace, and back), and that costs more than keeping the B micro-panel in L1: with
//     KC = 512 (B panel 32 KiB, L1-resident) bf16 ran at 428-449 GFLOP/s, with KC = 2048 (128
//     KiB, streamed from L2 at ~11 B/cycle, well within its bandwidth) at 465-494 (2048^3: 428
//     -> 494, i.e. 84% -> 97% of dot_bf16; m=128 n=24576 k=1536: 419 -> 465); fp8 411 -> 456,
//     s8 (KC = 4096) 800 -> 850 GOP/s (one thread, CPU time, 2026-11-30). A 12 x 32 tile alone,
//     all operands in L1, runs at ~100% of the ceiling. f32 the same way: KC 256 -> 2048 took
//     m=1024 n=1024 k=2048 from 225 to 239 GFLOP/s and m=256 n=2048 k=7168 from 227 to 242.
// MC: 384 rows = 32 panels of 12. With the long KC the A block (384 x 2048 bf16 = 1.5 MiB) no
//     longer fits the 1 MiB L2; it still measured fastest of the KCs tried, but a smaller MC
//     with the long KC is the next experiment.
// NC: the packed B block (KC x NC, 2 MiB) lives in L3 and is packed once per (NC, KC) block;
//     every A block is packed once per NC columns, so a wide NC makes A packing negligible
//     (2 * NC FLOPs per packed element).
// Skinny M (<= 16 rows in all, decode): B is streamed from DRAM once and reused only by the
//     <= 2 A panels, so KC = all of K: each 32-column panel of a packed B is then one
//     contiguous run and the panels follow each other, a single sequential stream for the
//     hardware prefetcher (with KC blocks it jumped between panels every 32 KiB and reached
//     only ~45% of the floor at M = 16). NC = 64 keeps a plain B packed on the fly in L2
//     (K x 64 elements) between packing and use.
// Partial sums outside D (bf16 output, or C = D in place) take an M x NC f32 workspace per
//     thread; NC shrinks until it is at most 4 MiB.
// NC is then evened out over the columns: 2112 columns run as one block of 2112, not as
//     2048 + 64 (which packs all of A a second time for 3% of the work).
// m_total decides KC (and so the summation order) from the whole problem, never from a
// thread's share; m_rows and n_cols are the calling thread's block.
inline Blocking choose_blocking(DType in, int64_t m_total, int64_t m_rows, int64_t n_cols, int64_t k,
                                bool partials_in_workspace) {
  using kernels::kGemmMR;
  using kernels::kGemmNR;
  Blocking b;
  const bool skinny = m_total <= 16;
  b.kc = skinny ? std::max<int64_t>(4, (k + 3) / 4 * 4) : in == DType::i8 ? 4096 : 2048;
  b.mc = 384;
  b.nc = skinny ? 64 : 2048;
  if (partials_in_workspace && k > b.kc) {
    const int64_t fit = (int64_t(4) << 20) / (4 * std::max<int64_t>(m_rows, 1));
    b.nc = std::clamp<int64_t>(fit / kGemmNR * kGemmNR, kGemmNR, b.nc);
  }
  const int64_t blocks = std::max<int64_t>(1, n_cols / b.nc);
  b.nc = (n_cols + blocks - 1) / blocks;
  b.nc = std::max<int64_t>(kGemmNR, (b.nc + kGemmNR - 1) / kGemmNR * kGemmNR);
  static_assert(384 % kGemmMR == 0 && 2048 % kGemmNR == 0 && 64 % kGemmNR == 0);
  return b;
}

}  // namespace sol::gemm_detail
