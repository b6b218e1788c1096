// AVX2 weighted row sum of MoE's combine: out[c] = round_out(fma(w[k-1], rows[k-1][c], ...
// fma(w[0], rows[0][c], 0))), rows in order, null rows skipped; the reference's fused
// multiply-adds eight columns a vector, so the AVX-512 kernel's bits. No look-ahead, no
// streaming stores (next_rows, stream and tp are speed hints this level leaves unused).
#include <cstring>

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
  // The last 1-7 columns through padded copies.
  const size_t size = t == DType::f32 ? 4 : 2, out_size = ot == DType::f32 ? 4 : 2, left = size_t(h - c);
  alignas(32) unsigned char in[32] = {}, result[32];
  __m256 acc = _mm256_setzero_ps();
  for (int64_t j = 0; j < k; ++j) {
    if (!rows[j]) continue;
    std::memcpy(in, static_cast<const unsigned char*>(rows[j]) + size_t(c) * size, left * size);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(w[j]), load8(in, t, 0), acc);
  }
  store8(result, ot, 0, acc);
  std::memcpy(static_cast<unsigned char*>(out) + size_t(c) * out_size, result, left * out_size);
}

}  // namespace sol::kernels
