#pragma once
// Host side of the GEMM tile kernels' TMA: the box each operand's tensor map must describe for a
// GemmTilePlan (K-major: K innermost, one 128-byte swizzled row of K per box row; an MN-major B
// [K, N]: N innermost, one 128-byte swizzled row of N per row of K) and the box the TMA-store
// epilogue writes D in, checked against the driver's rules before cuTensorMapEncodeTiled sees it.

#include <cstdint>

#include "kernels/cuda/sm90/sm90_gemm_plan.h"
#include "kernels/cuda/sm90/sm90_tma_rules.h"

namespace sol::kernels::sm90 {

// A K-major operand of `rows` x `k` elements with rows `row_stride` elements apart, loaded in
// boxes of `box_rows` rows: Plan::block_m for A, Plan::block_n for B.
template <class Plan>
TmaBox gemm_tile_operand_box(const void* data, std::uint64_t rows, std::uint64_t k, std::uint64_t row_stride,
                             std::uint32_t box_rows, std::string_view op) {
  TmaBox t;
  t.global_address = reinterpret_cast<std::uintptr_t>(data);
  t.rank = 2;
  t.element_bytes = Plan::element_bytes;
  t.dims[0] = k;
  t.dims[1] = rows;
  t.strides_bytes[1] = row_stride * Plan::element_bytes;
  t.box[0] = Plan::block_k;
  t.box[1] = box_rows;
  t.swizzle = Plan::swizzle;
  check_tma_box(t, op);
  return t;
}

// B for Plan: [n, k] rows `ldb` elements apart (K-major), or, when Plan::b_mn_major, [k, n] rows
// `ldb` elements apart, loaded as Plan::b_box_inner columns of N by Plan::b_box_outer rows of K
// (the kernel issues Plan::b_boxes of them per stage, sm90_gemm_plan.h).
template <class Plan>
TmaBox gemm_tile_b_box(const void* data, std::uint64_t n, std::uint64_t k, std::uint64_t ldb, std::string_view op) {
  if constexpr (!Plan::b_mn_major) {
    return gemm_tile_operand_box<Plan>(data, n, k, ldb, Plan::block_n, op);
  } else {
    TmaBox t;
    t.global_address = reinterpret_cast<std::uintptr_t>(data);
    t.rank = 2;
    t.element_bytes = Plan::element_bytes;
    t.dims[0] = n;
    t.dims[1] = k;
    t.strides_bytes[1] = ldb * Plan::element_bytes;
    t.box[0] = Plan::b_box_inner;
    t.box[1] = Plan::b_box_outer;
    t.swizzle = Plan::swizzle;
    check_tma_box(t, op);
    return t;
  }
}

// D [rows, n] (row-major, dense, out_bytes 2 for bf16 or 4 for f32) as the TMA-store epilogue
// writes it: boxes of one 128-byte swizzled row of columns by one consumer's 64 rows
// (sm90_gemm_store.h); TMA clips a box at rows and n.
inline TmaBox gemm_store_box(const void* data, std::uint64_t rows, std::uint64_t n, std::uint32_t out_bytes,
                             std::string_view op) {
  TmaBox t;
  t.global_address = reinterpret_cast<std::uintptr_t>(data);
  t.rank = 2;
  t.element_bytes = out_bytes;
  t.dims[0] = n;
  t.dims[1] = rows;
  t.strides_bytes[1] = n * out_bytes;
  t.box[0] = store_box_cols(out_bytes);
  t.box[1] = kStoreBoxRows;
  t.swizzle = kStoreSwizzle;
  check_tma_box(t, op);
  return t;
}

}  // namespace sol::kernels::sm90
