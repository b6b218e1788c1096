#pragma once
// One softmax row per call, per ISA (internal). scratch holds n f32 (the exponentials between
// the sum and the final scaling, so exp runs once per element).
#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {
void softmax_row_scalar(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch);
void softmax_row_avx512(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch);
}  // namespace sol::kernels
