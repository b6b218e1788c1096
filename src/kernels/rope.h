#pragma once
// Rotate the rope slices of one token's heads in place (internal, per ISA): head h's slice
// starts at x + h * head_stride (bytes); every element x[i] = x[i] * c[i] + x[pair(i)] * s[i]
// with pair(i) = i ^ 1 (interleaved) or (i + d/2) mod d (half), one fused multiply-add; all heads
// share one position (c, s). d <= 512. The slices are short runs at a large stride, which the
// hardware prefetchers do not follow: at head h the kernel prefetches the slice
// kRopePrefetchHeads heads ahead, into the next token's heads (at next, same head stride; null
// when there is none) once past this token's last.
#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {
constexpr int64_t kRopePrefetchHeads = 64;
void rope_rotate_heads_scalar(void* x, DType t, int64_t head_stride, int64_t heads, const float* c, const float* s,
                              int64_t d, bool interleaved, const void* next);
void rope_rotate_heads_avx512(void* x, DType t, int64_t head_stride, int64_t heads, const float* c, const float* s,
                              int64_t d, bool interleaved, const void* next);
}  // namespace sol::kernels
