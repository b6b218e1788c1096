#include <cmath>

#include "kernels/activation.h"

namespace sol::kernels {

void silu_mul_scalar(const void* g, const void* u, DType t, void* y, DType yt, int64_t n) {
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

}  // namespace sol::kernels
