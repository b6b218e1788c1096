#include <cmath>

#include "kernels/sigmoid.h"

namespace sol::kernels {
void sigmoid_row_scalar(const void* x, DType t, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(x)[i]) : static_cast<const float*>(x)[i];
    out[i] = 1.0f / (1.0f + std::exp(-v));
  }
}
}  // namespace sol::kernels
