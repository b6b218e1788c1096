// AVX-512 activations (16-lane helpers in vec16_avx512.h; exp16 stays private to this file).
#include "kernels/activation.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {

namespace {

// exp(x) to ~2 ulp: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact product),
// a degree-6 Taylor/minimax-style polynomial for exp(r), and vscalefps for 2^n, which saturates
// to inf / 0 at the ends of the range instead of wrapping the exponent.
[[gnu::always_inline]] inline __m512 exp16(__m512 x) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace

void silu_mul_avx512(const void* g, const void* u, DType t, void* y, DType yt, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    __m512 gv = load16(g, t, i, m);
    // Large negative g: exp(-g) -> inf and g / inf -> -0, the limit of silu; NaN propagates.
    __m512 v = _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv)))),
                             load16(u, t, i, m));
    store16(y, yt, i, m, v);
  }
}

}  // namespace sol::kernels
