#include <cmath>

#include "kernels/norm.h"

namespace sol::kernels {

namespace {
float get(const void* p, DType t, int64_t i) {
  return t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
}
// The partial sum that element i goes into (kernels/norm.h): i % 64 for f32; for bf16 the
// vector path widens 32 elements at a time into even and odd elements, so within a block of
// 64, element j goes to accumulator 2 (j / 32) + j % 2, lane (j % 32) / 2.
int64_t partial(int64_t i, DType t) {
  const int64_t j = i % 64;
  if (t != DType::bf16) return j;
  return 16 * (2 * (j / 32) + j % 2) + (j % 32) / 2;
}

// The vector paths' order: lane k of (a0 + a1) + (a2 + a3) over the four 16-lane accumulators,
// then the 16 lanes one after another.
float combine(const float (&part)[64]) {
  float s = 0;
  for (int k = 0; k < 16; ++k) s += (part[k] + part[16 + k]) + (part[32 + k] + part[48 + k]);
  return s;
}
void put(void* p, DType t, int64_t i, float v) {
  if (t == DType::bf16) static_cast<uint16_t*>(p)[i] = f32_to_bf16(v);
  else static_cast<float*>(p)[i] = v;
}
}  // namespace

float sum_squares_scalar(const void* x, DType t, int64_t n, const TuningParams&) {
  // The same 64 partial sums, fused multiply-adds and final order as the vector path (four
  // 16-lane accumulators): both paths give the same bits.
  float part[64] = {};
  for (int64_t i = 0; i < n; ++i) {
    float v = get(x, t, i);
    float& p = part[partial(i, t)];
    p = std::fma(v, v, p);  // as vfmadd: one rounding
  }
  return combine(part);
}

void scale_by_weight_scalar(const void* x, DType xt, float inv, const void* w, DType wt, void* y,
                            DType yt, int64_t n) {
  for (int64_t i = 0; i < n; ++i) put(y, yt, i, (get(x, xt, i) * inv) * get(w, wt, i));
}

float sum_scalar(const void* x, DType t, int64_t n, const TuningParams&) {
  float part[64] = {};
  for (int64_t i = 0; i < n; ++i) part[partial(i, t)] += get(x, t, i);
  return combine(part);
}

void shifted_sums_scalar(const void* x, DType t, float shift, int64_t n, float* sum_d, float* sum_d2,
                         const TuningParams&) {
  float p1[64] = {}, p2[64] = {};
  for (int64_t i = 0; i < n; ++i) {
    float d = get(x, t, i) - shift;
    p1[partial(i, t)] += d;
    p2[partial(i, t)] = std::fma(d, d, p2[partial(i, t)]);
  }
  *sum_d = combine(p1);
  *sum_d2 = combine(p2);
}

void layernorm_apply_scalar(const void* x, DType xt, float shift, float dm_inv, float inv, const void* w,
                            const void* b, DType wt, void* y, DType yt, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = std::fma(get(x, xt, i) - shift, inv, -dm_inv);  // as vfmsub: one rounding
    put(y, yt, i, b ? std::fma(v, get(w, wt, i), get(b, wt, i)) : v * get(w, wt, i));
  }
}

void add_into_scalar(const void* x, DType xt, void* r, DType rt, int64_t n) {
  for (int64_t i = 0; i < n; ++i) put(r, rt, i, get(r, rt, i) + get(x, xt, i));
}

}  // namespace sol::kernels
