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

// LayerNorm statistics in two passes, 16 partial sums each: the sum of x, then the sums of
// d = x - shift and of d^2 around a shift near the mean. The second pass corrects the f32 mean
// of the first, so both stay accurate when the mean is large next to the spread.
float sum_scalar(const void* x, DType t, int64_t n);
float sum_avx512(const void* x, DType t, int64_t n);
void shifted_sums_scalar(const void* x, DType t, float shift, int64_t n, float* sum_d, float* sum_d2);
void shifted_sums_avx512(const void* x, DType t, float shift, int64_t n, float* sum_d, float* sum_d2);

// y[i] = round_y((((x[i] - shift) - dm) * inv) * w[i] + b[i]), mean = shift + dm kept in two
// parts (x - shift is exact for x near the mean; a rounded f32 mean would not be); b may be null.
void layernorm_apply_scalar(const void* x, DType xt, float shift, float dm, float inv, const void* w, const void* b,
                            DType wt, void* y, DType yt, int64_t n);
void layernorm_apply_avx512(const void* x, DType xt, float shift, float dm, float inv, const void* w, const void* b,
                            DType wt, void* y, DType yt, int64_t n);

// r[i] = round_r(r[i] + x[i]).
void add_into_scalar(const void* x, DType xt, void* r, DType rt, int64_t n);
void add_into_avx512(const void* x, DType xt, void* r, DType rt, int64_t n);

}  // namespace sol::kernels
