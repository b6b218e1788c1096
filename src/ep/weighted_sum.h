#pragma once
// The low-latency combine's reduction: out = Σ_j weights[j]·rows[j] (bf16 rows, f32 sums in
// order, one rounding to bf16), by the kernels of kernels/weighted_sum.h.
#include <cstdint>

namespace sol::ep {

void weighted_sum_bf16(uint16_t* out, const uint16_t* const* rows, const float* weights, int count, int64_t n);

}  // namespace sol::ep
