// AVX-512 sigmoid row (helpers and exp16 in vec16_avx512.h).
#include "kernels/sigmoid.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {
void sigmoid_row_avx512(const void* x, DType t, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    __m512 v = load16(x, t, i, m);
    _mm512_mask_storeu_ps(out + i, m, _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), v)))));
  }
}
}  // namespace sol::kernels
