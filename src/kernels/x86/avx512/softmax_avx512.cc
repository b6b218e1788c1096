// AVX-512 softmax row (16-lane helpers and exp16 in vec16_avx512.h).
#include <cmath>

#include "kernels/softmax.h"
#include "kernels/x86/avx512/fast16_avx512.h"

namespace sol::kernels {

void softmax_row_avx512(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch, bool stream) {
  const int64_t es = int64_t(dtype_size(t));
  // Pass 1: the maximum of the numbers (vmaxps drops NaN). A NaN, +inf or an all -inf row
  // needs no test of its own: x - max is NaN somewhere, so is the sum, and 1 / sum makes every
  // output NaN, as sol/softmax.h says.
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    prefetch_ahead(x, i * es);  // passes 2 and 3 run from L1/L2; this one streams from memory
    mx = _mm512_max_ps(mx, _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), m, load16(x, t, i, m)));
  }
  const __m512 mv = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  // Pass 2: exponentials into scratch and their sum, 16 partial sums in a fixed order.
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    __m512 e = _mm512_maskz_mov_ps(m, exp16_nonpositive(_mm512_sub_ps(load16(x, t, i, m), mv)));
    _mm512_mask_storeu_ps(scratch + i, m, e);
    acc = _mm512_add_ps(acc, e);
  }
  alignas(64) float part[16];
  _mm512_store_ps(part, acc);
  float sum = 0;
  for (float p : part) sum += p;
  // Pass 3: scale and store.
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  write_row(y, yt, n, stream,
            [&](int64_t i, __mmask16 m) { return _mm512_mul_ps(_mm512_maskz_loadu_ps(m, scratch + i), inv); });
}

}  // namespace sol::kernels
