// The portable weighted sum (kernels/weighted_sum.h) and the family's table.
#include "kernels/weighted_sum.h"

#include "sol/dtype.h"

namespace sol::kernels {

void weighted_sum_bf16_scalar(uint16_t* out, const uint16_t* const* rows, const float* weights, int count, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float acc = 0.0f;
    for (int j = 0; j < count; ++j) acc += weights[j] * bf16_to_f32(rows[j][i]);
    out[i] = f32_to_bf16(acc);
  }
}

namespace {
constexpr WeightedSumKernels kScalar{weighted_sum_bf16_scalar};
constexpr WeightedSumKernels kAvx2{weighted_sum_bf16_avx2};
constexpr WeightedSumKernels kAvx512{weighted_sum_bf16_avx512};
constexpr KernelEntry<WeightedSumKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                                      {Backend::cpu, Isa::avx2, &kAvx2},
                                                      {Backend::cpu, Isa::avx512, &kAvx512}};
}  // namespace

KernelTable<WeightedSumKernels> weighted_sum_kernel_table() { return kTable; }

}  // namespace sol::kernels
