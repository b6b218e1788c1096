#pragma once
// Row primitives of the norms, per ISA (internal). Elements are f32 or bf16; arithmetic in f32.
#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {

// Sum of x[i]^2 in f32, 16 partial sums combined in a fixed order.
float sum_squares_scalar(const void* x, DType t, int64_t n);
float sum_squares_avx512(const void* x, DType t, int64_t n);

// y[i] = round_y((x[i] * inv) * w[i]).
void scale_by_weight_scalar(const void* x, DType xt, float inv, const void* w, DType wt, void* y,
                            DType yt, int64_t n);
void scale_by_weight_avx512(const void* x, DType xt, float inv, const void* w, DType wt, void* y,
                            DType yt, int64_t n);

// r[i] = round_r(r[i] + x[i]).
void add_into_scalar(const void* x, DType xt, void* r, DType rt, int64_t n);
void add_into_avx512(const void* x, DType xt, void* r, DType rt, int64_t n);

}  // namespace sol::kernels
