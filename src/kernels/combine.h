#pragma once
// Weighted sum of gathered rows (internal, AVX2 and AVX-512): the combine step of moe_unpermute.
#include <cstdint>

#include "core/kernel_table.h"
#include "sol/dtype.h"
#include "sol/tuning.h"

namespace sol::kernels {

// out[c] = round_out(sum over j = 0..k-1 of w[j] * rows[j][c]) for c < h, j in order, in f32 with
// one fused multiply-add per term (rows[j] == nullptr: no term). rows f32 or bf16, out f32 or
// bf16; stream and tp as in kernels/activation.h. next_rows (next_k entries, any may be null;
// next_k may be 0): the rows the following call will sum, whose first lines are requested
// while these rows end (speed only).
void weighted_row_sum_avx2(const void* const* rows, const float* w, int64_t k, const void* const* next_rows,
                           int64_t next_k, DType t, void* out, DType ot, int64_t h, bool stream, const TuningParams& tp);
void weighted_row_sum_avx512(const void* const* rows, const float* w, int64_t k, const void* const* next_rows,
                             int64_t next_k, DType t, void* out, DType ot, int64_t h, bool stream,
                             const TuningParams& tp);

// MoE combine's kernels at one ISA level: the weighted row sum (null below AVX2, where the op
// sums in f32 through the exact bulk conversions).
struct CombineKernels {
  decltype(&weighted_row_sum_avx512) weighted_row_sum;
};
KernelTable<CombineKernels> combine_kernel_table();

}  // namespace sol::kernels
