// The scalar sigmoid row: the AVX-512 kernel's formula one lane at a time (the exponential of
// kernels/cuda/device_exp_math.cuh, which the device routing shares), so routing scores, and
// with them the weights, are the same bits on every path.
#include "kernels/cuda/device_exp_math.cuh"
#include "kernels/sigmoid.h"

namespace sol::kernels {
void sigmoid_row_scalar(const void* x, DType t, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(x)[i]) : static_cast<const float*>(x)[i];
    out[i] = sol_cuda::sigmoid_f32(v);
  }
}
}  // namespace sol::kernels
