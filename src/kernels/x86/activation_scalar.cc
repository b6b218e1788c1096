#include <cmath>

#include "kernels/activation.h"

namespace sol::kernels {

void silu_mul_scalar(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool, const void*,
                     const TuningParams&) {
  auto get = [t](const void* p, int64_t i) {
    return t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
  };
  for (int64_t i = 0; i < n; ++i) {
    float gv = get(g, i);
    float v = gv / (1.0f + std::exp(-gv)) * get(u, i);
    if (yt == DType::bf16) static_cast<uint16_t*>(y)[i] = f32_to_bf16(v);
    else static_cast<float*>(y)[i] = v;
  }
}

void gelu_scalar(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool, const TuningParams&) {
  for (int64_t i = 0; i < n; ++i) {
    float v = t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(x)[i]) : static_cast<const float*>(x)[i];
    // 1 + erf(z) = erfc(-z) and 1 + tanh(u) = 2 / (1 + exp(-2u)): neither cancels in the
    // negative tail, where 1 + erf or 1 + tanh would lose every digit in f32.
    float g = erf_form ? 0.5f * v * std::erfc(-v * 0.70710678118654752f)
                       : v / (1.0f + std::exp(-2.0f * 0.79788456080286536f * (v + 0.044715f * v * v * v)));
    if (yt == DType::bf16) static_cast<uint16_t*>(y)[i] = f32_to_bf16(g);
    else static_cast<float*>(y)[i] = g;
  }
}

}  // namespace sol::kernels
