#pragma once
// Host side of one launch of the sm90 GEMM tile kernels (sm90_gemm_tile_kernels.cuh): the
// problem's limits, the TMA boxes of both operands and of D (checked by sm90_tma_rules.h before the driver
// encodes them) and the launch shape. No driver call here, so it is unit-tested without a GPU;
// src/ops/gemm/gemm_sm90_cuda.cc encodes the boxes and launches.

#include <cstdint>
#include <string_view>

#include "kernels/cuda/sm90/sm90_fp8_promotion.h"
#include "kernels/cuda/sm90/sm90_gemm_boxes.h"

namespace sol::kernels::sm90 {

// D [m, n] bf16 row-major = A [m, k] * B [n, k]^T, A and B K-major with rows lda / ldb elements
// apart, or (a Plan whose B is MN-major: layout nn) D = A [m, k] * B [k, n], B's rows ldb apart;
// `scaled`: DeepGEMM's fp8 block scales (K a multiple of 128).
struct GemmTileProblem {
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;  // D [m, n] bf16, dense: the epilogue's TMA store box covers it
  std::uint64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0;
  bool scaled = false;
};

struct GemmTileLaunch {
  TmaBox a, b, d;
  std::uint32_t grid[3] = {1, 1, 1};     // (tiles along N, tiles along M, 1)
  std::uint32_t block[3] = {1, 1, 1};    // Plan::threads
  std::uint32_t cluster[3] = {1, 1, 1};  // one CTA per tile, no cluster
  std::uint32_t dynamic_shared_bytes = 0;
};

// Throws sol::Error naming `op`, the argument, expected and got. m, n, k >= 1 (the caller skips
// an empty product); n a multiple of 8 (the epilogue stores bf16 pairs, and D's rows must keep
// them 4-byte aligned; also TMA's stride rule for a B [k, n]); k's bytes a multiple of 16 (TMA's
// stride rule); lda >= k, ldb >= k (B [n, k]) or >= n (B [k, n]).
template <class Plan>
GemmTileLaunch plan_gemm_tile_launch(const GemmTileProblem& p, std::string_view op) {
  check(p.m >= 1 && p.n >= 1 && p.k >= 1, op, "m, n, k = ", p.m, ", ", p.n, ", ", p.k, " but each must be >= 1");
  check(p.m <= 0xFFFFFFFFu && p.n <= 0xFFFFFFFFu && p.k <= 0xFFFFFFFFu, op, "m, n, k = ", p.m, ", ", p.n, ", ", p.k,
        " but the kernel indexes them with 32 bits");
  check(p.n % 8 == 0, op, "n = ", p.n, " but it must be a multiple of 8 (bf16 pairs in the epilogue)");
  check(p.k * Plan::element_bytes % 16 == 0, op, "k = ", p.k, " (", p.k * Plan::element_bytes,
        " bytes) but a row of A and B must be a multiple of 16 bytes (TMA)");
  if (p.scaled)
    check(p.k % kFp8ScaleBlock == 0, op, "k = ", p.k, " but fp8 block scales need a multiple of ", kFp8ScaleBlock);
  check(p.lda >= p.k, op, "lda = ", p.lda, " but it must be >= k = ", p.k);
  const std::uint64_t b_row = Plan::b_mn_major ? p.n : p.k;
  check(p.ldb >= b_row, op, "ldb = ", p.ldb, " but it must be >= ", Plan::b_mn_major ? "n = " : "k = ", b_row);
  GemmTileLaunch l;
  l.a = gemm_tile_operand_box<Plan>(p.a, p.m, p.k, p.lda, Plan::block_m, op);
  l.b = gemm_tile_b_box<Plan>(p.b, p.n, p.k, p.ldb, op);
  l.d = gemm_store_box(p.d, p.m, p.n, 2, op);
  const std::uint64_t tiles_m = (p.m + Plan::block_m - 1) / Plan::block_m;
  check(tiles_m <= 65535, op, "m = ", p.m, " needs ", tiles_m, " row tiles but a grid's y is at most 65535");
  l.grid[0] = std::uint32_t((p.n + Plan::block_n - 1) / Plan::block_n);
  l.grid[1] = std::uint32_t(tiles_m);
  l.block[0] = Plan::threads;
  l.dynamic_shared_bytes = Plan::smem_bytes;
  return l;
}

}  // namespace sol::kernels::sm90
