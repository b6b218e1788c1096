#pragma once
// From routing to DeepGEMM's contiguous grouped layout and back.
//
// moe_permute: every (token t, choice j) with expert e = topk_idx[t, j] gets one row of x_perm,
// holding x[t]. Rows are grouped by expert in ascending order, in (t, j) order within an expert,
// and each expert's block is padded up to a multiple of `alignment` rows (DeepGEMM's M
// alignment for the contiguous layout, 128); an expert with no tokens takes no rows.
// grouped_layout[r] = the expert of row r, -1 on padding rows (whose x_perm rows are zeroed);
// row_of[t, j] = the row (t, j) went to. topk_idx = -1 means "not routed here" (expert
// parallelism masks remote experts so): no row, row_of = -1. Any other id outside [0, experts)
// is an error. topk_idx is i32 or i64 (DeepEP's type); row_of and grouped_layout are i32.
// moe_unpermute: out[t] = sum_j topk_weights[t, j] * y_perm[row_of[t, j]], j in order, in f32
// (rows with row_of = -1 contribute nothing), rounded once to out's dtype.
#include <cstdint>

#include "sol/tensor.h"

namespace sol {

// Rows moe_permute will write for this routing (the size of x_perm and grouped_layout).
int64_t moe_permuted_rows(const Tensor& topk_idx, int64_t experts, int64_t alignment);

void moe_permute(const Tensor& x, const Tensor& topk_idx, int64_t experts, int64_t alignment,
                 const Tensor& x_perm, const Tensor& grouped_layout, const Tensor& row_of);

void moe_unpermute(const Tensor& y_perm, const Tensor& row_of, const Tensor& topk_weights, const Tensor& out);

}  // namespace sol
