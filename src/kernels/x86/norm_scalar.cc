#include <cmath>

#include "kernels/norm.h"

namespace sol::kernels {

namespace {
float get(const void* p, DType t, int64_t i) {
  return t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
}
void put(void* p, DType t, int64_t i, float v) {
  if (t == DType::bf16) static_cast<uint16_t*>(p)[i] = f32_to_bf16(v);
  else static_cast<float*>(p)[i] = v;
}
}  // namespace

float sum_squares_scalar(const void* x, DType t, int64_t n) {
  // The same 16 partial sums, fused multiply-adds and final order as the vector path: both
  // paths give the same bits.
  float part[16] = {};
  for (int64_t i = 0; i < n; ++i) {
    float v = get(x, t, i);
    part[i % 16] = std::fma(v, v, part[i % 16]);  // as vfmadd: one rounding
  }
  float s = 0;
  for (float p : part) s += p;
  return s;
}

void scale_by_weight_scalar(const void* x, DType xt, float inv, const void* w, DType wt, void* y,
                            DType yt, int64_t n) {
  for (int64_t i = 0; i < n; ++i) put(y, yt, i, (get(x, xt, i) * inv) * get(w, wt, i));
}

void add_into_scalar(const void* x, DType xt, void* r, DType rt, int64_t n) {
  for (int64_t i = 0; i < n; ++i) put(r, rt, i, get(r, rt, i) + get(x, xt, i));
}

}  // namespace sol::kernels
