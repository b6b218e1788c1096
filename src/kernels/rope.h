#pragma once
// Rotate the rope slices of one token's heads in place (internal, per ISA): head h's slice
// starts at x + h * head_stride (bytes); every element x[i] = x[i] * c[i] + x[pair(i)] * s[i]
// with pair(i) = i ^ 1 (interleaved) or (i + d/2) mod d (half), one fused multiply-add; all heads
// share one position (c, s). d <= 512. The slices are short runs at a large stride, which the
// hardware prefetchers do not follow: at head h the kernel prefetches the slice
// tp.rope_prefetch_heads heads ahead into L1 and the one tp.rope_l2_prefetch_heads ahead into L2
// (none at 0), into the next token's heads (at next, same head stride; null when there is none)
// once past this token's last (speed only; the scalar kernel ignores tp).
#include <cstdint>

#include "core/kernel_table.h"
#include "sol/dtype.h"
#include "sol/tuning.h"

namespace sol::kernels {
void rope_rotate_heads_scalar(void* x, DType t, int64_t head_stride, int64_t heads, const float* c, const float* s,
                              int64_t d, bool interleaved, const void* next, const TuningParams& tp);
void rope_rotate_heads_avx2(void* x, DType t, int64_t head_stride, int64_t heads, const float* c, const float* s,
                            int64_t d, bool interleaved, const void* next, const TuningParams& tp);
void rope_rotate_heads_avx512(void* x, DType t, int64_t head_stride, int64_t heads, const float* c, const float* s,
                              int64_t d, bool interleaved, const void* next, const TuningParams& tp);
// Two tokens' heads in one call, head h of a then head h of b: two independent streams when the
// tokens lie far apart (the op pairs token t with one half a thread's range away: see
// docs/perf/layer-ops.md). Same results as one call per token.
struct RopeToken {
  void* x;           // the token's first rope slice
  const float* c;    // its position's cos row
  const float* s;    // and sin row
  const void* next;  // the token this one's prefetches run into (null: none)
};
void rope_rotate_two_tokens_avx2(const RopeToken& a, const RopeToken& b, DType t, int64_t head_stride, int64_t heads,
                                 int64_t d, bool interleaved, const TuningParams& tp);
void rope_rotate_two_tokens_avx512(const RopeToken& a, const RopeToken& b, DType t, int64_t head_stride, int64_t heads,
                                   int64_t d, bool interleaved, const TuningParams& tp);
// Rope's kernels at one ISA level: one token (every level) and two tokens interleaved (null in
// the scalar kernels: tokens go one at a time there).
struct RopeKernels {
  decltype(&rope_rotate_heads_scalar) rotate_heads;
  decltype(&rope_rotate_two_tokens_avx512) rotate_two_tokens;
};
KernelTable<RopeKernels> rope_kernel_table();

}  // namespace sol::kernels
