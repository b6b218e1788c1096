#pragma once
// Panels for the attention tile GEMMs (layouts in src/kernels/attention.h). The B operand of a
// product is either a matrix whose rows are the product's columns (K for S = Q K^T: one key per
// panel column) -- "transposed" -- or a matrix whose columns are the product's columns (V for
// O = P V) -- "interleaved", since bf16 pairs two consecutive rows. Both are zero-padded to
// whole panels, so tiles never read past them and padded keys contribute exact zeros.
#include <cstdint>

#include "kernels/attention.h"
#include "sol/dtype.h"

namespace sol::attention_detail {

// Elements of a transposed packing of rows x cols: ceil32(rows) * cols (cols even for bf16).
int64_t transposed_elems(int64_t rows, int64_t cols);
// Elements of an interleaved packing of rows x cols: ceil32(cols) * ceil32(rows).
int64_t interleaved_elems(int64_t rows, int64_t cols);

// src: rows x cols, row stride ld (elements). dst: panel r/32 holds rows [32p, 32p + 32) as its
// columns, k = the source column: f32 [k][32], bf16 [k/2][32][2].
void pack_transposed(const kernels::AttentionKernels& k, const void* src, int64_t ld, DType t, int64_t rows, int64_t cols, void* dst);
// dst: panel c/32 holds columns [32p, 32p + 32), k = the source row: f32 [ceil32(rows)][32],
// bf16 [ceil32(rows)/2][32][2].
void pack_interleaved(const kernels::AttentionKernels& k, const void* src, int64_t ld, DType t, int64_t rows, int64_t cols, void* dst);

// Address of the panel holding column `col` (a multiple of 32) at k step `k` (even for bf16),
// in a packing whose panels are `panel_elems` apart.
inline const void* panel_at(const void* packed, DType t, int64_t panel_elems, int64_t col, int64_t k) {
  const int64_t es = int64_t(dtype_size(t));
  return static_cast<const char*>(packed) + ((col / 32) * panel_elems + k * 32) * es;
}

}  // namespace sol::attention_detail
