// AVX-512 activations (16-lane helpers, exp16 included, in vec16_avx512.h).
#include "kernels/activation.h"
#include "kernels/x86/avx512/fast16_avx512.h"

namespace sol::kernels {

namespace {

// GELU's tanh form as 0.5 v (1 + tanh(u)) = v / (1 + exp(-2u)), with -2u = v (a + b v^2) and
// a = -2 sqrt(2/pi), b = 0.044715 a: no cancellation at either end (the form 2 - 2 / (exp(2u) + 1)
// loses every digit in the negative tail), and four fewer operations than forming u, 1 + tanh
// and 0.5 v separately. Very negative v: exp16's clamp gives inf and v / inf = -0, the limit.
[[gnu::always_inline]] inline __m512 gelu_tanh(__m512 v) {
  const __m512 minus_2u = _mm512_mul_ps(
      v, _mm512_fmadd_ps(_mm512_set1_ps(-0.0713548162726f), _mm512_mul_ps(v, v), _mm512_set1_ps(-1.5957691216057308f)));
  return _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(minus_2u)));
}

// 1 + erf(z) = erfc(-z), with erfc(a), a >= 0, by the Chebyshev-fitted formula of Numerical
// Recipes (erfcc: t = 1 / (1 + a/2), erfc = t exp(-a^2 + P(t)), relative error < 1.2e-7 for every
// a, so GELU's negative tail keeps its relative accuracy): 1 + erf(z) is erfc(|z|) for z < 0 and
// 2 - erfc(|z|) for z >= 0.
[[gnu::always_inline]] inline __m512 one_plus_erf(__m512 z) {
  const __m512 a = _mm512_abs_ps(z);
  const __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_set1_ps(0.5f), a, _mm512_set1_ps(1.0f)));
  static constexpr float c[] = {0.17087277f, -0.82215223f, 1.48851587f, -1.13520398f, 0.27886807f,
                                -0.18628806f, 0.09678418f, 0.37409196f, 1.00002368f, -1.26551223f};
  __m512 p = _mm512_set1_ps(c[0]);
  for (int k = 1; k < 10; ++k) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c[k]));
  const __m512 erfc = _mm512_mul_ps(t, exp16(_mm512_fnmadd_ps(a, a, p)));
  const __mmask16 neg = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_mov_ps(_mm512_sub_ps(_mm512_set1_ps(2.0f), erfc), neg, erfc);
}

}  // namespace

void silu_mul_avx512(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool stream) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const int64_t es = int64_t(dtype_size(t));
  write_row(y, yt, n, stream, [&](int64_t i, __mmask16 m) {
    prefetch_ahead(g, i * es);
    prefetch_ahead(u, i * es);
    const __m512 gv = load16(g, t, i, m);
    // Large negative g: exp(-g) -> inf and g / inf -> -0, the limit of silu; NaN propagates.
    return _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv)))),
                         load16(u, t, i, m));
  });
}

void gelu_avx512(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool stream) {
  const __m512 half = _mm512_set1_ps(0.5f);
  const int64_t es = int64_t(dtype_size(t));
  write_row(y, yt, n, stream, [&](int64_t i, __mmask16 m) {
    prefetch_ahead(x, i * es);
    const __m512 v = load16(x, t, i, m);
    // NaN inputs: every step propagates them (abs, compares aside), so y is NaN too.
    if (!erf_form) return gelu_tanh(v);
    return _mm512_mul_ps(_mm512_mul_ps(half, v), one_plus_erf(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f))));
  });
}

}  // namespace sol::kernels
