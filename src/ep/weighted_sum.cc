// The choice of the weighted sum's kernels (see weighted_sum.h).
#include "ep/weighted_sum.h"

#include "hw/kernel_select.h"
#include "kernels/weighted_sum.h"

namespace sol::ep {

void weighted_sum_bf16(uint16_t* out, const uint16_t* const* rows, const float* weights, int count, int64_t n) {
  // Decided once, as comm's reductions do: a decode-sized combine calls this per token.
  static const kernels::WeightedSumKernels& k = select_kernels(kernels::weighted_sum_kernel_table(), "ep combine");
  k.weighted_sum_bf16(out, rows, weights, count, n);
}

}  // namespace sol::ep
