#pragma once
// One softmax row per call, per ISA (internal). scratch holds n f32 (the exponentials between
// the sum and the final scaling, so exp runs once per element).
#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {
// stream: y may be written with non-temporal stores (a hint; see kernels/activation.h).
void softmax_row_scalar(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch, bool stream);
void softmax_row_avx512(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch, bool stream);
}  // namespace sol::kernels
