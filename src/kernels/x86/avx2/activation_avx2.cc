// AVX2 activations. silu-mul with f32 outputs: y = g / (1 + exp(-g)) * u, the scalar row's
// formula with exp8 (exp_avx2.h) for libm's exp, within a few f32 ulps of the scalar results, not
// their bits; exp8 saturates to inf from -g = 89 (g / inf = -0, silu's limit) and to 0 below -104
// (y = g u). With bf16 outputs a cheaper kernel of its own (silu_times_bf16), within 1 bf16 ulp.
// GELU: the AVX-512 kernels' f32-output formulas (activation_avx512.cc says why each holds its
// accuracy: tanh ~7e-6, erf ~7e-7 relative over all bf16 inputs), eight lanes at a time, with
// vscalefps and vfixupimmps spelled in AVX2 (scale2n8, relu_with_specials8); bf16 outputs are
// the rounding of those f32 results, so within 1 ulp of the correctly rounded GELU.
#include <cmath>
#include <cstddef>

#include "kernels/activation.h"
#include "kernels/x86/avx2/exp_avx2.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {

namespace {

template <size_t N> [[gnu::always_inline]] inline __m256 horner8(__m256 x, const float (&c)[N]) {
  __m256 p = _mm256_set1_ps(c[0]);
  for (size_t k = 1; k < N; ++k) p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(c[k]));
  return p;
}

// x 2^n for whole n as vscalefps for the ranges here: n clamped to [-252, 252] (beyond, x 2^n is
// 0 or inf for x in [1, 2) either way), then two factors 2^(n - h) 2^h, h = floor(n / 2), each
// normal: the first product is exact, the second rounds once (into the subnormals, or to inf).
[[gnu::always_inline]] inline __m256 scale2n8(__m256 x, __m256 n) {
  const __m256i k = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-252.0f)), _mm256_set1_ps(252.0f)));
  const __m256i h = _mm256_srai_epi32(k, 1);
  return _mm256_mul_ps(_mm256_mul_ps(x, pow2_normal8(_mm256_sub_epi32(k, h))), pow2_normal8(h));
}

// relu as the erf form needs it: v for v >= 0, +-0 and NaN; -0 for finite v < 0; NaN for -inf.
[[gnu::always_inline]] inline __m256 relu_with_specials8(__m256 v) {
  const __m256 negative = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 r = _mm256_blendv_ps(v, _mm256_set1_ps(-0.0f), negative);
  return _mm256_blendv_ps(r, _mm256_set1_ps(NAN), _mm256_cmp_ps(v, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
}

// GELU's tanh form: y = v / (1 + 2^(m + 64)), m = -2u log2(e) - 64, v clamped to +-12 for m only.
[[gnu::always_inline]] inline __m256 gelu_tanh8(__m256 v) {
  const __m256 vc = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-12.0f)), _mm256_set1_ps(12.0f));
  const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(-0.10294324159622192f), _mm256_mul_ps(vc, vc),
                                       _mm256_set1_ps(-2.302208185195923f));
  const __m256 m = _mm256_fmadd_ps(vc, inner, _mm256_set1_ps(-64.0f));
  const __m256 n = _mm256_round_ps(m, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  static constexpr float c4[] = {0.0135424957f, 0.051995486f, 0.241452172f, 0.693002105f, 1.00000262f};
  const __m256 e_low = scale2n8(horner8(_mm256_sub_ps(m, n), c4), n);
  const __m256 logistic = _mm256_mul_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(0x1p-64f), e_low)),
                                        _mm256_set1_ps(0x1p-64f));
  return _mm256_mul_ps(v, logistic);
}

// GELU's erf form: y = relu(v) - a h(a), a = min(|v|, 14.9), h(a) = T(a) exp(-a^2 / 2), T a
// rational fit, the exponential reduced as p - 2 n ln2 (activation_avx512.cc, gelu_erf_f32).
[[gnu::always_inline]] inline __m256 gelu_erf8(__m256 v) {
  const __m256 a = _mm256_min_ps(_mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF))),
                                 _mm256_set1_ps(14.9f));
  const __m256 p = _mm256_mul_ps(a, a);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(p, _mm256_set1_ps(-0.721347511f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 s = _mm256_fmadd_ps(n, _mm256_set1_ps(1.38629436f), p);
  static constexpr float e[] = {-0.000259072374f, 0.00261862064f, -0.0208345447f, 0.124997877f, -0.499999851f, 1.0f};
  static constexpr float pc[] = {0.0169177111f, 0.118982695f, 0.361014426f, 0.499999821f};
  static constexpr float qc[] = {0.0424117222f, 0.298034161f, 0.95080936f, 1.51989543f, 1.0f};
  const __m256 q = _mm256_div_ps(_mm256_mul_ps(horner8(a, pc), horner8(s, e)), horner8(a, qc));
  return _mm256_fnmadd_ps(a, scale2n8(q, n), relu_with_specials8(v));
}

[[gnu::always_inline]] inline __m256 silu_times(__m256 g, __m256 u) {
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

// silu(g) * u for bf16 outputs: within 2^-8 relative before the rounding (so each output is the
// correctly rounded fp64 value or its neighbour, the AVX-512 bf16 kernel's rule), with a short
// dependency chain: silu_times's exp8 and division put ~90 cycles of latency on each vector, and
// the scheduler holds too few vectors in flight to hide it. sigmoid(g) = 1 / (1 + 2^m),
// m = -g log2(e), through q = 2^-|m| <= 1, so the reciprocal's argument 1 + q stays in [1, 2]
// (vrcpps flushes tiny results to zero: the AVX-512 kernel's 2^-64-scaled reciprocal would lose
// the tail near g = -88 where the bf16 output is still normal); sigmoid is r = 1 / (1 + q) for
// m <= 0 and q r for m > 0. q = 2^t 2^n, t = -|m| - n in [0, 1) (the AVX-512 kernel's degree-2
// fit, 1.73e-3), n = floor(-|m|), 2^n added into 2^t's exponent field: as it is for n >= -126,
// 2^64 higher below (qx = q 2^64, normal down to n = -190; q = 0 beyond, where y is 0 in bf16),
// the 2^-64 applied as the last factor of y = g r qx u 2^-64, where it rounds once (into the
// subnormals), after every factor that could underflow or overflow on its own; there qx < 2^-61,
// so 1 + qx is 1 as 1 + q is. vrcpps adds 3.7e-4 and 1 + q at most half of q's error: 3.0e-3 in
// all, under 2^-8 = 3.9e-3. g = +inf: q = 0, y = inf r u; g = -inf: y = -inf 0 u = NaN, as the fp64
// reference's -inf / inf; a NaN g reaches y through its own products.
[[gnu::always_inline]] inline __m256 silu_times_bf16(__m256 g, __m256 u) {
  const __m256 m = _mm256_mul_ps(g, _mm256_set1_ps(-1.44269502f));
  const __m256 neg_abs_m = _mm256_or_ps(m, _mm256_set1_ps(-0.0f));  // -|m|
  const __m256 neg_abs = _mm256_max_ps(neg_abs_m, _mm256_set1_ps(-190.0f));
  const __m256 n = _mm256_round_ps(neg_abs, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  static constexpr float c2[] = {0.337186604738235474f, 0.657639026641845703f, 1.00172424316406250f};
  const __m256 p = horner8(_mm256_sub_ps(neg_abs, n), c2);  // 2^t in [1, 2)
  const __m256 normal = _mm256_cmp_ps(n, _mm256_set1_ps(-126.0f), _CMP_GE_OQ);
  const __m256i shift = _mm256_add_epi32(_mm256_cvtps_epi32(n),
                                         _mm256_andnot_si256(_mm256_castps_si256(normal), _mm256_set1_epi32(64)));
  const __m256 qx = _mm256_and_ps(  // 0 where -|m| was clamped: |m| > 190, infinities, NaN
      _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(shift, 23))),
      _mm256_cmp_ps(neg_abs_m, _mm256_set1_ps(-190.0f), _CMP_GE_OQ));
  const __m256 r = _mm256_rcp_ps(_mm256_add_ps(_mm256_set1_ps(1.0f), qx));
  const __m256 gr = _mm256_mul_ps(g, r);
  const __m256 scale = _mm256_blendv_ps(_mm256_set1_ps(0x1p-64f), _mm256_set1_ps(1.0f), normal);
  const __m256 tail = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(gr, qx), u), scale);
  return _mm256_blendv_ps(_mm256_mul_ps(gr, u), tail, _mm256_cmp_ps(m, _mm256_setzero_ps(), _CMP_GT_OQ));
}

}  // namespace

void silu_mul_avx2(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool, const void*,
                   const TuningParams&) {
  const auto run = [&](auto f) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) store8(y, yt, i, f(load8(g, t, i), load8(u, t, i)));
    if (i < n) store8_n(y, yt, i, n - i, f(load8_n(g, t, i, n - i), load8_n(u, t, i, n - i)));
  };
  if (yt == DType::bf16)
    run([](__m256 gv, __m256 uv) { return silu_times_bf16(gv, uv); });
  else
    run([](__m256 gv, __m256 uv) { return silu_times(gv, uv); });
}

void gelu_avx2(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool, const TuningParams&) {
  const auto f = [erf_form](__m256 v) { return erf_form ? gelu_erf8(v) : gelu_tanh8(v); };
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(y, yt, i, f(load8(x, t, i)));
  if (i < n) store8_n(y, yt, i, n - i, f(load8_n(x, t, i, n - i)));
}

}  // namespace sol::kernels
