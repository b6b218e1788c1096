#pragma once
// Rotate one head's rope slice in place (internal, per ISA): x[i] = x[i] * c[i] + x[pair(i)] * s[i]
// with pair(i) = i ^ 1 (interleaved) or (i + d/2) mod d (half), one fused multiply-add.
#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {
void rope_rotate_scalar(void* x, DType t, const float* c, const float* s, int64_t d, bool interleaved);
void rope_rotate_avx512(void* x, DType t, const float* c, const float* s, int64_t d, bool interleaved);
}  // namespace sol::kernels
