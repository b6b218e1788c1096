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

void add_into_avx512(const void* x, DType xt, void* r, DType rt, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    store16(r, rt, i, m, _mm512_add_ps(load16(r, rt, i, m), load16(x, xt, i, m)));
  }
}

}  // namespace sol::kernels
