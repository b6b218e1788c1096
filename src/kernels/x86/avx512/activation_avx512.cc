// AVX-512 activations: the math once over V (a __m512 or a Pair, pair_avx512.h), run 32
// elements per step by map_row_pairs.
#include <utility>

#include "kernels/activation.h"
#include "kernels/x86/avx512/pair_avx512.h"

namespace sol::kernels {

namespace {

// silu(g) * u = g / (1 + exp(-g)) * u. Large negative g: exp(-g) -> inf and g / inf -> -0, the
// limit of silu; a NaN g propagates through the division (exp_neg_clamped89 does not keep it).
template <class V> [[gnu::always_inline]] inline V silu_times(V g, V u) {
  return mul(div(g, add(splat<V>(1.0f), exp_neg_clamped89(g))), u);
}

// GELU's tanh form as 0.5 v (1 + tanh(u)) = v / (1 + exp(-2u)), with 2u = v (a + b v^2) and
// a = 2 sqrt(2/pi), b = 0.044715 a: no cancellation at either end (the form 2 - 2 / (exp(2u) + 1)
// loses every digit in the negative tail), and four fewer operations than forming u, 1 + tanh
// and 0.5 v separately. Very negative v: the exponential saturates to inf and v / inf = -0, the
// limit; a NaN v reaches y through the division. The degree-4 exp: y's relative error is at most
// the exponential's (2.7e-6) times exp / (1 + exp) < 1.
template <class V> [[gnu::always_inline]] inline V gelu_tanh(V v) {
  const V two_u = mul(v, fmadd(splat<V>(0.0713548162726f), mul(v, v), splat<V>(1.5957691216057308f)));
  return div(v, add(splat<V>(1.0f), exp_neg_clamped89<V, true>(two_u)));
}

// GELU's erf form, v Phi(v) with Phi(v) = 0.5 erfc(-v / sqrt 2): h = 0.5 erfc(a), a = |v| / sqrt 2,
// in the form of Numerical Recipes' erfcc (t = 1 / (1 + a/2), erfc = t exp(-a^2 + P(t))), with
// the 0.5 folded in: t' = 1 / (2 + a) = t / 2 and h = t' exp(-a^2 + P'(t')). P' is this
// project's own fit (degree 7, Lawson's iteration on a in [0, 14], t' in [1/16, 1/2]): absolute
// error of P' = relative error of h, 6.9e-7 in the fit, 8.1e-7 with f32 coefficients and f32
// Estrin evaluation, uniform in a, so GELU's negative tail keeps its relative accuracy (NR's
// degree 9 gave 1.2e-7 for three operations more; session 5 of docs/perf/layer-ops.md: gelu
// erf is bound by instruction issue). Phi is h for v < 0 and 1 - h otherwise.
// a = inf gives t' = 0, a^2 - P = inf, h = 0 and y = v (NaN for v = -inf: -inf * 0, as in the
// reference); a NaN v reaches y through the final product.
template <class V> [[gnu::always_inline]] inline V gelu_erf(V v) {
  const V a = each([](__m512 x) { return _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678118654752f)); }, v);
  const V t = div(splat<V>(1.0f), add(splat<V>(2.0f), a));
  // P' coefficients, highest power first.
  static constexpr float c[] = {-23.982501983642578f, 48.009334564208984f, -31.978147506713867f, 5.585695266723633f,
                                -0.3184610605239868f, 1.5767784118652344f,  1.9970202445983887f,  -1.2654691934585571f};
  // Estrin's scheme: three levels of products instead of seven dependent steps, since the
  // chain as much as the operation count bounds the loop.
  const V t2 = mul(t, t), t4 = mul(t2, t2);
  auto lin = [&](int k) { return fmadd(splat<V>(c[k]), t, splat<V>(c[k + 1])); };  // c_k t + c_k+1
  const V q0 = fmadd(lin(0), t2, lin(2)), q1 = fmadd(lin(4), t2, lin(6));
  const V p = fmadd(q0, t4, q1);
  const V g = each([](__m512 x, __m512 q) { return _mm512_fmsub_ps(x, x, q); }, a, p);  // a^2 - P
  const V h = mul(t, exp_neg_of_nonnegative(g));  // g >= 0 up to P's fit error
  const V phi = each([](__m512 x, __m512 hx) {
    const __mmask16 nonneg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_NLT_UQ);  // and NaN
    return _mm512_mask_sub_ps(hx, nonneg, _mm512_set1_ps(1.0f), hx);
  }, v, h);
  return mul(v, phi);
}

}  // namespace

namespace {

// The step (32 elements at i) and single (16 at i, lanes m) of one silu-mul row, as lambdas.
template <DType In>
[[gnu::always_inline]] inline auto silu_mul_row(const void* g, const void* u, int64_t n, const void* next_u) {
  constexpr int64_t es = In == DType::bf16 ? 2 : 4;
  auto step = [=](int64_t i) {
    if (next_u == nullptr || (i + 32) * es + kPrefetchBytes <= n * es) prefetch_ahead(g, i * es);
    else prefetch_ahead(next_u, (i - n) * es);  // g's prefetch would land in u, fetched already
    prefetch_ahead(u, i * es);
    if constexpr (es == 4) prefetch_ahead(g, i * es + 64), prefetch_ahead(u, i * es + 64);
    return silu_times(load_pair<In>(g, i), load_pair<In>(u, i));
  };
  auto single = [=](int64_t i, __mmask16 m) { return silu_times(load16(g, In, i, m), load16(u, In, i, m)); };
  return std::pair{step, single};
}

// The same for one gelu row (f: gelu_tanh or gelu_erf over V).
template <DType In, class F>
[[gnu::always_inline]] inline auto gelu_row(const void* x, F f) {
  constexpr int64_t es = In == DType::bf16 ? 2 : 4;
  auto step = [=](int64_t i) {
    prefetch_ahead(x, i * es);
    if constexpr (es == 4) prefetch_ahead(x, i * es + 64);
    return f(load_pair<In>(x, i));
  };
  auto single = [=](int64_t i, __mmask16 m) { return f(load16(x, In, i, m)); };
  return std::pair{step, single};
}

// Calls run(f) with f the gelu form as a generic lambda.
template <class Run>
[[gnu::always_inline]] inline void with_gelu_form(bool erf_form, Run&& run) {
  if (erf_form) run([](auto v) { return gelu_erf(v); });
  else run([](auto v) { return gelu_tanh(v); });
}

}  // namespace

void silu_mul_avx512(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool stream,
                     const void* next_u) {
  with_dtypes(t, yt, [&]<DType In, DType Out>() {
    auto [step, single] = silu_mul_row<In>(g, u, n, next_u);
    map_row_pairs<In, Out>(y, n, stream, step, single);
  });
}

void silu_mul2_avx512(const SiluMulRow& a, const SiluMulRow& b, DType t, DType yt, int64_t n, bool stream) {
  with_dtypes(t, yt, [&]<DType In, DType Out>() {
    auto [step_a, single_a] = silu_mul_row<In>(a.g, a.u, n, a.next_u);
    auto [step_b, single_b] = silu_mul_row<In>(b.g, b.u, n, b.next_u);
    map_two_rows_pairs<In, Out>(a.y, b.y, n, stream, step_a, single_a, step_b, single_b);
  });
}

void gelu_avx512(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool stream) {
  with_dtypes(t, yt, [&]<DType In, DType Out>() {
    with_gelu_form(erf_form, [&](auto f) {
      auto [step, single] = gelu_row<In>(x, f);
      map_row_pairs<In, Out>(y, n, stream, step, single);
    });
  });
}

void gelu2_avx512(const void* xa, void* ya, const void* xb, void* yb, DType t, DType yt, int64_t n, bool erf_form,
                  bool stream) {
  with_dtypes(t, yt, [&]<DType In, DType Out>() {
    with_gelu_form(erf_form, [&](auto f) {
      auto [step_a, single_a] = gelu_row<In>(xa, f);
      auto [step_b, single_b] = gelu_row<In>(xb, f);
      map_two_rows_pairs<In, Out>(ya, yb, n, stream, step_a, single_a, step_b, single_b);
    });
  });
}

}  // namespace sol::kernels
