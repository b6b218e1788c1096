// The portable weighted sum and the choice of path (see weighted_sum.h).
#include "ep/weighted_sum.h"

#include "sol/dtype.h"
#include "sol/hw.h"

namespace sol::ep {

void weighted_sum_bf16(uint16_t* out, const uint16_t* const* rows, const float* weights, int count, int64_t n) {
  // Decided once, as comm's reductions do: a decode-sized combine calls this per token.
  static const bool vector_path = isa_at_least(Isa::avx512);
  if (vector_path) return weighted_sum_bf16_avx512(out, rows, weights, count, n);
  for (int64_t i = 0; i < n; ++i) {
    float acc = 0.0f;
    for (int j = 0; j < count; ++j) acc += weights[j] * bf16_to_f32(rows[j][i]);
    out[i] = f32_to_bf16(acc);
  }
}

}  // namespace sol::ep
