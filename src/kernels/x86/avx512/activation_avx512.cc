// AVX-512 activations (16-lane helpers, exp16 included, in vec16_avx512.h).
#include "kernels/activation.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {

void silu_mul_avx512(const void* g, const void* u, DType t, void* y, DType yt, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    __m512 gv = load16(g, t, i, m);
    // Large negative g: exp(-g) -> inf and g / inf -> -0, the limit of silu; NaN propagates.
    __m512 v = _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv)))),
                             load16(u, t, i, m));
    store16(y, yt, i, m, v);
  }
}

}  // namespace sol::kernels
