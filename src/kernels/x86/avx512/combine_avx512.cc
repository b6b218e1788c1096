// AVX-512 weighted row sum: all k rows are read in one sweep over the columns, each 16-column
// block accumulated in a register, so no f32 copy of a row or of the sum is ever stored. The k
// rows are scattered in memory (one per chosen expert), k streams the hardware prefetcher
// tracks poorly: each is prefetched ahead by software.
#include "kernels/combine.h"
#include "kernels/x86/avx512/fast16_avx512.h"

namespace sol::kernels {

void weighted_row_sum_avx512(const void* const* rows, const float* w, int64_t k, DType t, void* out, DType ot,
                             int64_t h, bool stream) {
  const int64_t es = int64_t(dtype_size(t));
  write_row(out, ot, h, stream, [&](int64_t i, __mmask16 m) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < k; ++j) {
      if (!rows[j]) continue;
      prefetch_ahead(rows[j], i * es);
      acc = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), load16(rows[j], t, i, m), acc);
    }
    return acc;
  });
}

}  // namespace sol::kernels
