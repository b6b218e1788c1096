// AVX-512 row primitives of the norms (16-lane helpers in vec16_avx512.h).
#include "kernels/norm.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {

float sum_squares_avx512(const void* x, DType t, int64_t n) {
  // One 16-lane accumulator in the same lane order as the scalar path; the FMA latency is hidden
  // by the loads and conversions around it at memory speed.
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    __m512 v = load16(x, t, i, tail_mask(n - i));
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  alignas(64) float part[16];
  _mm512_store_ps(part, acc);
  float s = 0;
  for (float p : part) s += p;
  return s;
}

void scale_by_weight_avx512(const void* x, DType xt, float inv, const void* w, DType wt, void* y,
                            DType yt, int64_t n) {
  const __m512 iv = _mm512_set1_ps(inv);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    store16(y, yt, i, m, _mm512_mul_ps(_mm512_mul_ps(load16(x, xt, i, m), iv), load16(w, wt, i, m)));
  }
}

float sum_avx512(const void* x, DType t, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) acc = _mm512_add_ps(acc, load16(x, t, i, tail_mask(n - i)));
  alignas(64) float part[16];
  _mm512_store_ps(part, acc);
  float s = 0;
  for (float p : part) s += p;
  return s;
}

void shifted_sums_avx512(const void* x, DType t, float shift, int64_t n, float* sum_d, float* sum_d2) {
  const __m512 sv = _mm512_set1_ps(shift);
  __m512 a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    __m512 d = _mm512_maskz_sub_ps(m, load16(x, t, i, m), sv);
    a1 = _mm512_add_ps(a1, d);
    a2 = _mm512_fmadd_ps(d, d, a2);
  }
  alignas(64) float p1[16], p2[16];
  _mm512_store_ps(p1, a1);
  _mm512_store_ps(p2, a2);
  float s1 = 0, s2 = 0;
  for (int k = 0; k < 16; ++k) s1 += p1[k], s2 += p2[k];
  *sum_d = s1;
  *sum_d2 = s2;
}

void layernorm_apply_avx512(const void* x, DType xt, float shift, float dm, float inv, const void* w, const void* b,
                            DType wt, void* y, DType yt, int64_t n) {
  const __m512 sv = _mm512_set1_ps(shift), dv = _mm512_set1_ps(dm), iv = _mm512_set1_ps(inv);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(load16(x, xt, i, m), sv), dv), iv);
    __m512 r = b ? _mm512_fmadd_ps(v, load16(w, wt, i, m), load16(b, wt, i, m)) : _mm512_mul_ps(v, load16(w, wt, i, m));
    store16(y, yt, i, m, r);
  }
}

void add_into_avx512(const void* x, DType xt, void* r, DType rt, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    store16(r, rt, i, m, _mm512_add_ps(load16(r, rt, i, m), load16(x, xt, i, m)));
  }
}

}  // namespace sol::kernels
