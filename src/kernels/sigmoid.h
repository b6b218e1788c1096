#pragma once
// out[i] = 1 / (1 + exp(-x[i])) in f32 for a row of f32 or bf16 (internal, per ISA).
#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {
void sigmoid_row_scalar(const void* x, DType t, float* out, int64_t n);
void sigmoid_row_avx2(const void* x, DType t, float* out, int64_t n);
void sigmoid_row_avx512(const void* x, DType t, float* out, int64_t n);
}  // namespace sol::kernels
