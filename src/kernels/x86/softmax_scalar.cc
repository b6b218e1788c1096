#include <cmath>

#include "kernels/softmax.h"

namespace sol::kernels {

void softmax_row_scalar(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch, bool,
                        const TuningParams&) {
  auto get = [&](int64_t i) {
    return t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(x)[i]) : static_cast<const float*>(x)[i];
  };
  float mx = -INFINITY;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    float v = get(i);
    nan |= std::isnan(v);
    mx = v > mx ? v : mx;
  }
  if (nan) mx = NAN;
  float part[16] = {};
  for (int64_t i = 0; i < n; ++i) {
    scratch[i] = std::exp(get(i) - mx);
    part[i % 16] += scratch[i];
  }
  float sum = 0;
  for (float p : part) sum += p;
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) {
    if (yt == DType::bf16) static_cast<uint16_t*>(y)[i] = f32_to_bf16(scratch[i] * inv);
    else static_cast<float*>(y)[i] = scratch[i] * inv;
  }
}

}  // namespace sol::kernels
