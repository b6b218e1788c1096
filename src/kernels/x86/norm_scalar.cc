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

float sum_scalar(const void* x, DType t, int64_t n) {
  float part[16] = {};
  for (int64_t i = 0; i < n; ++i) part[i % 16] += get(x, t, i);
  float s = 0;
  for (float p : part) s += p;
  return s;
}

void shifted_sums_scalar(const void* x, DType t, float shift, int64_t n, float* sum_d, float* sum_d2) {
  float p1[16] = {}, p2[16] = {};
  for (int64_t i = 0; i < n; ++i) {
    float d = get(x, t, i) - shift;
    p1[i % 16] += d;
    p2[i % 16] = std::fma(d, d, p2[i % 16]);
  }
  float s1 = 0, s2 = 0;
  for (int k = 0; k < 16; ++k) s1 += p1[k], s2 += p2[k];
  *sum_d = s1;
  *sum_d2 = s2;
}

void layernorm_apply_scalar(const void* x, DType xt, float shift, float dm, float inv, const void* w, const void* b,
                            DType wt, void* y, DType yt, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = ((get(x, xt, i) - shift) - dm) * inv;
    put(y, yt, i, b ? std::fma(v, get(w, wt, i), get(b, wt, i)) : v * get(w, wt, i));
  }
}

void add_into_scalar(const void* x, DType xt, void* r, DType rt, int64_t n) {
  for (int64_t i = 0; i < n; ++i) put(r, rt, i, get(r, rt, i) + get(x, xt, i));
}

}  // namespace sol::kernels
