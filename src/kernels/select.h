#pragma once
// Threshold filter for top-k selection over long rows (internal, per ISA): the one pass over a
// vocabulary-sized row that finds the few candidates worth sorting.
#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {

// Appends every i in [0, n) with x[i] > thr (x f32 or bf16, compared as f32; NaN never passes)
// to val[count..] and idx[count..] = base + i, in increasing i; returns the number appended.
// val and idx need room for the matches plus 16 slack entries (whole vectors are stored).
int64_t collect_above_scalar(const void* x, DType t, int64_t n, float thr, int32_t base, float* val, int32_t* idx);
int64_t collect_above_avx512(const void* x, DType t, int64_t n, float thr, int32_t base, float* val, int32_t* idx);

// A value equal (as floats) to the k-th largest of v[0..n) (1 <= k <= n; no NaN; the AVX-512
// version orders -0 below +0, nth_element does not, and -0 == +0). The scalar version partitions
// (nth_element: branches on data, ~half of them mispredicted); the AVX-512 one builds the
// answer bit by bit, 32 branch-free counting passes over v.
float kth_largest_scalar(const float* v, int64_t n, int64_t k);
float kth_largest_avx512(const float* v, int64_t n, int64_t k);

}  // namespace sol::kernels
