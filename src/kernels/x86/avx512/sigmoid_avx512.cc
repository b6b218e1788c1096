// AVX-512 sigmoid row (the formula in sigmoid16_avx512.h, exp16 in vec16_avx512.h).
#include "kernels/sigmoid.h"
#include "kernels/x86/avx512/sigmoid16_avx512.h"

namespace sol::kernels {
void sigmoid_row_avx512(const void* x, DType t, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, m, sigmoid16(load16(x, t, i, m)));
  }
}
}  // namespace sol::kernels
