#pragma once
// The persistent sm90 GEMM as kernels: one macro line per configuration, written by the launcher
// (src/ops/gemm/gemm_sm90_persistent*.cc) into the JIT program of that configuration and by the
// offline checks (tests/kernels/cuda/sm90_gemm_persistent_kernels.cu) into theirs, so both build
// the same text. Symbols: sol_sm90_gemm_persistent_<kind>_<block_m>x<block_n>_s<stages>[_c2]; b_major
// is B's OperandMajor (k, or mn for a bf16 B stored [K, N], whose kind is bf16_nn); map_d is D
// [rows, n] in boxes of one 128-byte swizzled row by 64 rows (sm90_gemm_store.h).
#include "kernels/cuda/sm90/sm90_gemm_persistent.cuh"

#define SOL_SM90_PERSISTENT_KERNEL_NAMED(name, bm, bn, st, bytes, scaled, b_major, cluster)                 \
  extern "C" __global__ void __launch_bounds__(                                                             \
      sol::kernels::sm90::GemmTilePlan<bm, bn, st, bm / 64, bytes,                                          \
                                       sol::kernels::sm90::OperandMajor::b_major, cluster>::threads, 1)     \
      name(const __grid_constant__ sol::kernels::sm90::TmaDescriptor map_a,                                  \
           const __grid_constant__ sol::kernels::sm90::TmaDescriptor map_b,                                  \
           const __grid_constant__ sol::kernels::sm90::TmaDescriptor map_d,                                  \
           const __grid_constant__ sol::kernels::sm90::PersistentGemmArgs args) {                            \
    using Plan = sol::kernels::sm90::GemmTilePlan<bm, bn, st, bm / 64, bytes,                                \
                                                  sol::kernels::sm90::OperandMajor::b_major, cluster>;       \
    sol::kernels::sm90::gemm_persistent<Plan, sol::kernels::sm90::GemmTileScheduler<bm, bn, 8, cluster>,     \
                                        scaled>(&map_a, &map_b, &map_d, args);                               \
  }

#define SOL_SM90_PERSISTENT_KERNEL(kind, bm, bn, st, bytes, scaled, b_major) \
  SOL_SM90_PERSISTENT_KERNEL_NAMED(sol_sm90_gemm_persistent_##kind##_##bm##x##bn##_s##st, bm, bn, st, bytes, scaled, b_major, 1)

// B multicast over a cluster of `cluster` vertically adjacent tiles (sm90_gemm_plan.h), launched
// with that cluster shape; K-major B only. Symbol: ..._s<stages>_c<cluster>.
#define SOL_SM90_PERSISTENT_CLUSTER_KERNEL(kind, bm, bn, st, bytes, scaled, cluster)                              \
  SOL_SM90_PERSISTENT_KERNEL_NAMED(sol_sm90_gemm_persistent_##kind##_##bm##x##bn##_s##st##_c##cluster, bm, bn, st, \
                                   bytes, scaled, k, cluster)

// The split-K reduction of a program's configuration: a contiguous layout's row rule
// (layout_row_ok) depends on the tile's rows, so the reduction writes exactly the rows the
// block_m-row tiles computed.
#define SOL_SM90_SPLIT_REDUCE_KERNEL(bm)                                                                     \
  extern "C" __global__ void sol_sm90_gemm_split_reduce(                                                     \
      const __grid_constant__ sol::kernels::sm90::PersistentGemmArgs args) {                                 \
    sol::kernels::sm90::gemm_split_reduce<sol::kernels::sm90::GemmTileScheduler<bm, 64>>(args);            \
  }
