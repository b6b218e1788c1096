// AVX-512 softmax row (16-lane helpers and exp16 in vec16_avx512.h).
#include <cmath>

#include "kernels/softmax.h"
#include "kernels/x86/avx512/fast16_avx512.h"

namespace sol::kernels {

void softmax_row_avx512(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch) {
  // Pass 1: the maximum. vmaxps drops NaNs, so they are tracked in a mask and poison the row.
  __m512 mx = _mm512_set1_ps(-INFINITY);
  __mmask16 nan = 0;
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    __m512 v = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), m, load16(x, t, i, m));
    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    mx = _mm512_max_ps(mx, v);
  }
  const float row_max = nan ? NAN : _mm512_reduce_max_ps(mx);
  const __m512 mv = _mm512_set1_ps(row_max);
  // Pass 2: exponentials into scratch and their sum, 16 partial sums in a fixed order.
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    __m512 e = _mm512_maskz_mov_ps(m, exp16(_mm512_sub_ps(load16(x, t, i, m), mv)));
    _mm512_mask_storeu_ps(scratch + i, m, e);
    acc = _mm512_add_ps(acc, e);
  }
  alignas(64) float part[16];
  _mm512_store_ps(part, acc);
  float sum = 0;
  for (float p : part) sum += p;
  // Pass 3: scale and store.
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    store16_fast(y, yt, i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, scratch + i), inv));
  }
}

}  // namespace sol::kernels
