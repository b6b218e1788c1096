#include <cmath>
#include <cstring>

#include "kernels/quant.h"

namespace sol::kernels {

namespace {
float load_f32(const void* x, DType t, int64_t i) {
  if (t == DType::bf16) return bf16_to_f32(static_cast<const uint16_t*>(x)[i]);
  return static_cast<const float*>(x)[i];
}
}  // namespace

float abs_max_scalar(const void* x, DType t, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float v = std::fabs(load_f32(x, t, i));
    if (std::isnan(v)) return __builtin_nanf("");  // one NaN pattern in every path
    m = v > m ? v : m;
  }
  return m;
}

void scale_to_f32_scalar(const void* x, DType t, float m, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = load_f32(x, t, i) * m;
}

void dequant_scale_scalar(const uint8_t* q, float s, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = e4m3_to_f32(q[i]) * s;
}

}  // namespace sol::kernels
