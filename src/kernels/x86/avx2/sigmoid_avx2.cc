// AVX2 sigmoid row: sigmoid8 (exp_avx2.h), the scalar row's bits (routing scores, and with them
// the weights, agree on every path). The tail goes through a padded vector: the scalar
// sigmoid's inline header is not included here, where the linker could hand its AVX2 build to
// baseline code.
#include "kernels/sigmoid.h"
#include "kernels/x86/avx2/exp_avx2.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {

void sigmoid_row_avx2(const void* x, DType t, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, sigmoid8(load8(x, t, i)));
  if (i < n) store8_n(out, DType::f32, i, n - i, sigmoid8(load8_n(x, t, i, n - i)));
}

}  // namespace sol::kernels
