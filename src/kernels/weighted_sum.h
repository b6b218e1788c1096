#pragma once
// out = Σ_j weights[j]·rows[j] over bf16 rows (f32 sums in the order given, one rounding to
// bf16): the low-latency EP combine's reduction. Every level gives identical bits (multiply
// then add, no FMA).
#include <cstdint>

#include "core/kernel_table.h"

namespace sol::kernels {

void weighted_sum_bf16_scalar(uint16_t* out, const uint16_t* const* rows, const float* weights, int count, int64_t n);
void weighted_sum_bf16_avx2(uint16_t* out, const uint16_t* const* rows, const float* weights, int count, int64_t n);
void weighted_sum_bf16_avx512(uint16_t* out, const uint16_t* const* rows, const float* weights, int count, int64_t n);

struct WeightedSumKernels {
  decltype(&weighted_sum_bf16_scalar) weighted_sum_bf16;
};
KernelTable<WeightedSumKernels> weighted_sum_kernel_table();

}  // namespace sol::kernels
