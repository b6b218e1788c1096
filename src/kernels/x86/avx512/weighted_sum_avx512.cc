// out = Σ_j w[j]·rows[j] over bf16 rows, accumulated in f32 in the order given, rounded once
// to bf16 — the reduction of the low-latency combine, 16 lanes at a time. Multiply then add
// (ISA files are built without contraction, cmake/SolIsaFlags.cmake), so the bits equal the
// portable loop's.
#include "kernels/weighted_sum.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {

void weighted_sum_bf16_avx512(uint16_t* out, const uint16_t* const* rows, const float* weights, int count, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512 acc = _mm512_setzero_ps();
    for (int j = 0; j < count; ++j)
      acc = _mm512_add_ps(acc, _mm512_mul_ps(_mm512_set1_ps(weights[j]), load16(rows[j], DType::bf16, i, m)));
    store16(out, DType::bf16, i, m, acc);
  }
}

}  // namespace sol::kernels
