// AVX2 weighted row sum of MoE's combine: out[c] = round_out(fma(w[k-1], rows[k-1][c], ...
// fma(w[0], rows[0][c], 0))), rows in order, null rows skipped; the reference's fused
// multiply-adds eight columns a vector, so the AVX-512 kernel's bits. No look-ahead, no
// streaming stores (next_rows, stream and tp are speed hints this level leaves unused).
#include "kernels/combine.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {

void weighted_row_sum_avx2(const void* const* rows, const float* w, int64_t k, const void* const*, int64_t,
                           DType t, void* out, DType ot, int64_t h, bool, const TuningParams&) {
  int64_t c = 0;
  for (; c + 8 <= h; c += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t j = 0; j < k; ++j)
      if (rows[j]) acc = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), load8(rows[j], t, c), acc);
    store8(out, ot, c, acc);
  }
  if (c == h) return;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t j = 0; j < k; ++j)
    if (rows[j]) acc = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), load8_n(rows[j], t, c, h - c), acc);
  store8_n(out, ot, c, h - c, acc);
}

}  // namespace sol::kernels
