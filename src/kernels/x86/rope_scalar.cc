#include <cmath>
#include <vector>

#include "kernels/rope.h"

namespace sol::kernels {

namespace {
void rotate(void* x, DType t, const float* c, const float* s, int64_t d, bool interleaved) {
  float v[512];  // rope_dim <= 512 is checked by the op
  for (int64_t i = 0; i < d; ++i)
    v[i] = t == DType::bf16 ? bf16_to_f32(static_cast<uint16_t*>(x)[i]) : static_cast<float*>(x)[i];
  for (int64_t i = 0; i < d; ++i) {
    int64_t p = interleaved ? (i ^ 1) : (i + d / 2) % d;
    float r = std::fma(v[p], s[i], v[i] * c[i]);
    if (t == DType::bf16) static_cast<uint16_t*>(x)[i] = f32_to_bf16(r);
    else static_cast<float*>(x)[i] = r;
  }
}
}  // namespace

void rope_rotate_heads_scalar(void* x, DType t, int64_t head_stride, int64_t heads, const float* c, const float* s,
                              int64_t d, bool interleaved, const void*, const TuningParams&) {
  for (int64_t h = 0; h < heads; ++h) rotate(static_cast<char*>(x) + h * head_stride, t, c, s, d, interleaved);
}

}  // namespace sol::kernels
