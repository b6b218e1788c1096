// AVX-512 activations: the math once over V (a __m512 or a Pair, pair_avx512.h), run 32
// elements per step by map_row_pairs.
#include <cstddef>
#include <utility>

#include "kernels/activation.h"
#include "kernels/quant.h"
#include "kernels/x86/flush_subnormals.h"
#include "kernels/x86/avx512/e4m3_quant64_avx512.h"
#include "kernels/x86/avx512/pair_avx512.h"

namespace sol::kernels {

namespace {

// silu(g) * u = g / (1 + exp(-g)) * u. Large negative g: exp(-g) -> inf and g / inf -> -0, the
// limit of silu; a NaN g propagates through the division (exp_neg_clamped89 does not keep it).
template <class V> [[gnu::always_inline]] inline V silu_times(V g, V u) {
  return mul(div(g, add(splat<V>(1.0f), exp_neg_clamped89(g))), u);
}

// Horner's scheme for c[0] x^(N-1) + ... + c[N-1] (highest power first).
template <class V, size_t N> [[gnu::always_inline]] inline V horner(V x, const float (&c)[N]) {
  V p = splat<V>(c[0]);
  for (size_t k = 1; k < N; ++k) p = fmadd(p, x, splat<V>(c[k]));
  return p;
}

// 1 / x to 2^-14 relative (vrcp14ps): enough for the bf16-output kernels, and a third of a
// division's cost in the FMA pipes.
template <class V> [[gnu::always_inline]] inline V rcp(V x) {
  return each([](__m512 d) { return _mm512_rcp14_ps(d); }, x);
}

// 1 / (1 + 2^(m + 64)), the logistic function of silu and of gelu's tanh form, from m = -z log2(e)
// - 64 (z the logistic's argument; the -64 folded by the caller into the FMA that forms m). The
// reciprocal is taken 2^-64 lower, 2^-64 / (2^-64 + 2^m), so that where 2^(m + 64) would
// overflow f32 (the callers' tails) 2^m stays finite and the reciprocal's result normal; times
// 2^-64 by a multiply, not vscalefps: the same bits (both exact, or rounded once
// to nearest even into the subnormals), and a multiply is an FMA-pipe slot where vscalefps issues
// at one per cycle at best (docs/perf/layer-ops.md). m = n + t, n = floor(m), t in
// [0, 1); 2^t by a relative minimax fit (Lawson's iteration, f32 coefficients, Horner): degree
// 4, 2.7e-6, with a division; for bf16 outputs degree 2, 1.73e-3, with vrcp14ps (2^-14): the
// logistic takes at most 2^m's relative error, so ~1.8e-3 before the rounding, inside the 2^-8
// that the 1-ulp rule leaves. vscalefps applies 2^n and saturates instead of wrapping.
template <bool kBf16Out, class V> [[gnu::always_inline]] inline V logistic_of_exp2(V m) {
  const V n = each([](__m512 x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }, m);
  const V t = sub(m, n);  // exact, in [0, 1)
  static constexpr float c4[] = {0.0135424957f, 0.051995486f, 0.241452172f, 0.693002105f, 1.00000262f};
  static constexpr float c2[] = {0.337186604738235474f, 0.657639026641845703f, 1.00172424316406250f};
  const V e_low = each([](__m512 q, __m512 k) { return _mm512_scalef_ps(q, k); }, kBf16Out ? horner(t, c2) : horner(t, c4), n);
  const V den = add(splat<V>(0x1p-64f), e_low);
  return mul(kBf16Out ? rcp(den) : div(splat<V>(1.0f), den), splat<V>(0x1p-64f));
}

// silu(g) * u for bf16 outputs (also what the fused FP8 path quantizes): within 2^-8 relative
// before the rounding, so each bf16 output is the correctly rounded fp64 value or a neighbour
// (1 ulp), the rule gelu's bf16 outputs follow; not the rounding of the f32 output.
// sigmoid(g) = logistic_of_exp2(m) with m = -g log2(e) - 64 in one FMA. The 2^-64 keeps e 2^-64
// finite down to g = -177 (the tail, where y is still a bf16 subnormal, ends near g = -92), and
// the sigmoid times g before u, so no product overflows. g is clamped to +-180 (sign kept) for
// the exponent only: +inf gives sigmoid 1 and y = inf u; g <= -178 gives e 2^-64 = inf, sigmoid
// 0, y = g 0 u = +-0, and -inf gives -inf * 0 = NaN, as the division of silu_times and the fp64
// reference (-inf / inf); vrangeps maps a NaN g to +-180, and g itself carries it to y.
template <class V> [[gnu::always_inline]] inline V silu_times_bf16(V g, V u) {
  const V m = each([](__m512 x) {
    return _mm512_fmadd_ps(_mm512_range_ps(x, _mm512_set1_ps(180.0f), 0x02), _mm512_set1_ps(-1.44269502f),
                           _mm512_set1_ps(-64.0f));
  }, g);
  return mul(mul(g, logistic_of_exp2<true>(m)), u);
}

// GELU, y = v Phi(v), both forms. Precision: f32 outputs hold the fp64 GELU to ~1e-5 relative
// (over all bf16 inputs: tanh 6.9e-6, erf 7.2e-7) wherever y is a normal f32, the negative tail
// included. bf16 outputs (kBf16Out, also what the fused FP8 path quantizes) take lower degrees
// and vrcp14ps instead of the division: tanh at most ~1.8e-3 relative before the rounding, erf
// ~2.4e-3 (gelu_erf_bf16), both below 2^-8, so every bf16 output is the correctly rounded GELU
// or its neighbour (1 ulp); tests/ops/test_silu_mul.cc checks that over all 65536 bf16 inputs.
// They are not the rounding of the f32 outputs.

// The erf form as y = relu(v) - |v| h(|v|), with h = Phi(-|v|) the share of the normal tail
// beyond |v|: for v < 0, y = v h; for v >= 0, y = v - v h. h carries all the dynamic range
// (down to 1e-45) as a product of positive factors, so y keeps its relative accuracy, and no
// branch or blend separates the two signs. relu here is one vfixupimmps on v's class: v for
// v >= 0, +-0, +inf and NaN (quietened); -0 for finite v < 0; NaN for -inf, as the reference
// gives (-inf * 0 there; the limit would be -0). a is |v| clamped to a bound beyond which
// h(a) a is 0 in f32, so +inf gives relu(inf) - a * 0 = inf and v <= -bound gives -0.
[[gnu::always_inline]] inline __m512 relu_with_specials(__m512 v) {
  // Token per class (4 bits each, class 0 lowest): QNaN: v; SNaN: quiet v; +-0: v; +1: v;
  // -inf: NaN; +inf: v; negative: -0; positive: v.
  return _mm512_fixupimm_ps(v, v, _mm512_set1_epi32(0x17131121), 0);
}
template <class V> [[gnu::always_inline]] inline V abs_clamped(V v, float bound) {
  // vrangeps: the smaller magnitude of (v, bound), sign cleared. NaN stays NaN or becomes the
  // bound; either way relu(v) carries it to y.
  return each([bound](__m512 x) { return _mm512_range_ps(x, _mm512_set1_ps(bound), 0x0A); }, v);
}
template <class V> [[gnu::always_inline]] inline V relu_minus(V v, V a, V h) {
  return each([](__m512 x, __m512 ax, __m512 hx) { return _mm512_fnmadd_ps(ax, hx, relu_with_specials(x)); }, v, a, h);
}

// GELU's tanh form: y = v Phi(v), Phi = 1 / (1 + e), e = exp(-2u) = 2^(m + 64), 2u = v (c1 +
// c2 v^2), c1 = 2 sqrt(2/pi), c2 = 0.044715 c1, m = -2u log2 e - 64 (log2 e folded into the
// constants and the -64 into the FMA that forms m: the reduction needs no multiply); Phi =
// logistic_of_exp2(m). e overflows f32 for v < -10.05, where y is still a normal f32 and bf16
// (down to ~1e-38), which is why the logistic is taken 2^-64 lower: e 2^-64 stays exact down to
// Phi's subnormals, which keep 20 bits wherever y is a normal f32. No sign split: no
// cancellation at either end. The 2u takes v clamped to +-12 (one vrangeps), so +-inf give no
// inf - inf; the final product takes v itself: +inf gives inf * 1 = inf; v <= -12 gives
// 2^(m - 64) = inf, Phi = 0 and v * 0 = -0, the limit; -inf gives -inf * 0 = NaN, as the fp64
// reference (-inf / inf); a NaN v stays NaN.
template <bool kBf16Out, class V> [[gnu::always_inline]] inline V gelu_tanh(V v) {
  const V vc = each([](__m512 x) { return _mm512_range_ps(x, _mm512_set1_ps(12.0f), 0x02); }, v);  // sign kept
  const V m = each([](__m512 x) {  // -2u log2 e - 64
    const __m512 inner = _mm512_fmadd_ps(_mm512_set1_ps(-0.10294324159622192f), _mm512_mul_ps(x, x),
                                         _mm512_set1_ps(-2.302208185195923f));
    return _mm512_fmadd_ps(x, inner, _mm512_set1_ps(-64.0f));
  }, vc);
  return mul(v, logistic_of_exp2<kBf16Out>(m));
}

// GELU's erf form: h(a) = Phi(-a) = 0.5 erfc(a / sqrt 2) = T(a) exp(-a^2 / 2), where T(a) =
// Phi(-a) exp(a^2 / 2) is smooth and slowly varying (0.5 at 0, ~ 0.4 / a for large a): a
// rational P3(a) / Q4(a) fits it to 3.6e-7 relative on [0, 13.5] (this project's fit: iterated
// weighted least squares on the relative error; 6.6e-7 with f32 coefficients and f32 Horner;
// beyond 13.5, where y is below 1e-39, it stays within 2e-6). exp(-a^2 / 2) with p = a^2 exact
// for bf16 inputs: n = round(-p log2(e) / 2), s = p + 2 n ln2 in one FMA (the product exact, so
// the reduction adds no error beyond s's own rounding), exp(-s / 2) by the degree-5
// exp(-x) fit with coefficients times 2^-k (exact), and vscalefps for 2^n. a <= 14.9: h a = 0.
// This is the f32-output kernel; bf16 outputs take gelu_erf_bf16 below.
template <class V> [[gnu::always_inline]] inline V gelu_erf_f32(V v) {
  const V a = abs_clamped(v, 14.9f);
  const V p = mul(a, a);
  const V n = each([](__m512 x) {
    return _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(-0.721347511f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }, p);
  const V s = fmadd(n, splat<V>(1.38629436f), p);  // p - 2 |n| ln2, |s| <= ln2
  static constexpr float e[] = {-0.000259072374f, 0.00261862064f, -0.0208345447f, 0.124997877f, -0.499999851f, 1.0f};
  static constexpr float pc[] = {0.0169177111f, 0.118982695f, 0.361014426f, 0.499999821f};
  static constexpr float qc[] = {0.0424117222f, 0.298034161f, 0.95080936f, 1.51989543f, 1.0f};
  const V q = div(mul(horner(a, pc), horner(s, e)), horner(a, qc));
  const V h = each([](__m512 x, __m512 k) { return _mm512_scalef_ps(x, k); }, q, n);
  return relu_minus(v, a, h);
}

// The erf form for bf16 outputs (also what the fused FP8 path quantizes), to ~2.4e-3 relative
// before the rounding: any computed y within 2^-8 |y| of the true GELU rounds to the correctly
// rounded bf16 value or one of its neighbours, the rule for bf16 outputs (1 ulp; at a binade's
// bottom the ulp below is half, which is where 2^-8 rather than 2^-7 is the bound). Same
// shape as gelu_erf_f32, with every part as cheap as that budget allows:
// - b = c a, c = sqrt(log2(e) / 2), so m = -b^2 = -a^2 log2(e) / 2 in one operation and
//   exp(-a^2 / 2) = 2^m = 2^n 2^f, n = round(m), f = m - n in [-1/2, 1/2] (the rounding of b
//   and m costs ~1e-5 of 2^m at a = 14); 2^f by a degree-2 fit (1.73e-3).
// - T(a) as a cubic in t = 1 / (1 + k a), k = 0.358, t by vrcp14ps (2^-14): 5.5e-4 on
//   [0, 14] (fitted here, Lawson's iteration on the relative error, k scanned); the cubic's
//   coefficients carry 1 / c, so y = relu(v) - (b P(t)) (2^f 2^n) needs no a.
// Emulated in f32 over every finite bf16 input (t perturbed by +-2^-14): at most 2.37e-3.
// Beyond a = 14 the output is below bf16's smallest subnormal, so the fit's range can stop there.
template <class V> [[gnu::always_inline]] inline V gelu_erf_bf16(V v) {
  const V a = abs_clamped(v, 14.9f);
  const V b = mul(a, splat<V>(0.849321782588958740f));
  const V m = each([](__m512 x) { return _mm512_fnmadd_ps(x, x, _mm512_setzero_ps()); }, b);  // -b^2
  const V n = each([](__m512 x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }, m);
  const V f = sub(m, n);  // exact
  static constexpr float e2[] = {0.238426923751831055f, 0.703447937965393066f, 1.00044322013854980f};
  static constexpr float pt[] = {0.332329034805297852f, 0.0683908537030220032f, 0.189937725663185120f,
                                 -0.00165020860731601715f};
  const V t = rcp(fmadd(b, splat<V>(0.421512782573699951f), splat<V>(1.0f)));
  // 2^m scaled on its own, off the reciprocal's chain (the longest): y = relu - (b P(t)) 2^m.
  // 2^m is an f32 subnormal for a > 13.2; its absolute error, ~2^-150 times b P(t) <= 0.4, is
  // far below bf16's smallest subnormal (2^-133).
  const V e = each([](__m512 x, __m512 k) { return _mm512_scalef_ps(x, k); }, horner(f, e2), n);
  return relu_minus(v, mul(b, horner(t, pt)), e);
}

template <bool kBf16Out, class V> [[gnu::always_inline]] inline V gelu_erf(V v) {
  if constexpr (kBf16Out) return gelu_erf_bf16(v);
  else return gelu_erf_f32(v);
}

}  // namespace

namespace {

// The step (32 elements at i) and single (16 at i, lanes m) of one silu-mul row, as lambdas.
// kBf16Out: the bf16-output kernel (silu_times_bf16).
template <DType In, bool kBf16Out>
[[gnu::always_inline]] inline auto silu_mul_row(const void* g, const void* u, int64_t n, const void* next_u, int64_t ahead) {
  constexpr int64_t es = In == DType::bf16 ? 2 : 4;
  auto f = [](auto gv, auto uv) __attribute__((always_inline)) {
    if constexpr (kBf16Out) return silu_times_bf16(gv, uv);
    else return silu_times(gv, uv);
  };
  // always_inline: GCC otherwise calls one row's step out of line in the two-row loop, its
  // results passed through the stack and the constants reloaded.
  auto step = [=](int64_t i) __attribute__((always_inline)) {
    if (next_u == nullptr || (i + 32) * es + ahead <= n * es) prefetch_ahead(g, i * es, ahead);
    else prefetch_ahead(next_u, (i - n) * es, ahead);  // g's prefetch would land in u, fetched already
    prefetch_ahead(u, i * es, ahead);
    if constexpr (es == 4) prefetch_ahead(g, i * es + 64, ahead), prefetch_ahead(u, i * es + 64, ahead);
    return f(load_pair<In>(g, i), load_pair<In>(u, i));
  };
  auto single = [=](int64_t i, __mmask16 m) { return f(load16(g, In, i, m), load16(u, In, i, m)); };
  return std::pair{step, single};
}

// The same for one gelu row (f: gelu_tanh or gelu_erf over V).
template <DType In, class F>
[[gnu::always_inline]] inline auto gelu_row(const void* x, int64_t ahead, F f) {
  constexpr int64_t es = In == DType::bf16 ? 2 : 4;
  auto step = [=](int64_t i) {
    prefetch_ahead(x, i * es, ahead);
    if constexpr (es == 4) prefetch_ahead(x, i * es + 64, ahead);
    return f(load_pair<In>(x, i));
  };
  auto single = [=](int64_t i, __mmask16 m) { return f(load16(x, In, i, m)); };
  return std::pair{step, single};
}

// Calls run(f) with f the gelu form for output dtype Out as a generic lambda.
template <DType Out, class Run>
[[gnu::always_inline]] inline void with_gelu_form(bool erf_form, Run&& run) {
  constexpr bool bf16_out = Out == DType::bf16;
  if (erf_form) run([](auto v) { return gelu_erf<bf16_out>(v); });
  else run([](auto v) { return gelu_tanh<bf16_out>(v); });
}

// ---- an activation row fused with per-token FP8 quantization ----
//
// Each group's bf16 outputs go to an L1 row buffer (the bits the plain kernel stores, but for
// f32-subnormal results, which become zeros of their sign: bf16_words_for_quant),
// their abs-max taken on the words as they are made; the group is encoded one group later
// (software-pipelined as rms_quant_row_t in quant_avx512.cc: the abs-max reduction and the
// scale's divisions, a ~40-cycle chain, overlap the next group's activation instead of
// stalling the encoder), by the plain quantizer's quant64_bf16 (e4m3_quant64_avx512.h), whose
// runs of the branch-free encoder take e4m3 subnormal results at full speed.

// The bf16 words of a step's 32 results for the quantizer, by vcvtne2ps2bf16 alone: no
// subnormal guard (bf16_words_in_order says why the codes cannot change; the guard, two
// vfpclassps, their mask moves and a branch per 32, cost ~10% of gelu's loop).
template <DType In> [[gnu::always_inline]] inline __m512i bf16_words_for_quant(const Pair& v) {
  if constexpr (In == DType::f32) return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(v.b, v.a));  // a: 0..15
  else return bf16_words_in_order(v.a, v.b);  // a: even elements, b: odd ones
}

// step(i): the activation's 32 results at i (a Pair in input layout In). n a multiple of
// group, group a multiple of 64; buf: n words, 64-byte aligned.
template <DType In, bool kStream, class Step>
[[gnu::always_inline]] inline void quant_row_fused(Step&& step, int64_t n, int64_t group, bool ue8m0, uint16_t* buf,
                                                   const QuantRowOut& out, const TuningParams& tp) {
  // The plain quantizer's encoder (a multiplier that is a power of two takes its general path,
  // exact all the same), with its runs of the branch-free encoder, which takes e4m3 subnormal
  // results at full speed; the caller keeps MXCSR as that encoder needs it.
  GroupCode fixed = fixed_group_code();
  int branch_free_groups = 0;
  const __m512i w7fff = _mm512_set1_epi16(0x7FFF);
  const int64_t groups = n / group;
  // Group g's bf16 outputs into buf, its scale stored and multiplier returned in mult; false
  // for a group holding NaN or inf (encoded after the run, from buf, by the token quantizer).
  auto produce = [&](int64_t g, float& mult) __attribute__((always_inline)) {
    __m512i m = _mm512_setzero_si512();
    for (int64_t i = g * group; i < (g + 1) * group; i += 32) {
      const Pair v = step(i);
      const __m512i w = bf16_words_for_quant<In>(v);
      _mm512_store_si512(buf + i, w);
      m = _mm512_max_epu16(m, _mm512_and_si512(w, w7fff));
    }
    const uint32_t amax_bits = max_of_words(m);
    if (__builtin_expect(amax_bits >= 0x7F80u, 0)) return false;
    const uint32_t f = amax_bits << 16;
    float amax, scale;
    __builtin_memcpy(&amax, &f, 4);
    fp8_group_scale(amax, ue8m0, scale, mult);
    out.scales[g * out.scale_stride] = scale;
    return true;
  };
  // Runs of 64 groups, the special ones after each run: a call inside the loop would clobber
  // every vector register (all are caller-saved) and GCC would rebuild the constants per group.
  for (int64_t g0 = 0; g0 < groups; g0 += 64) {
    const int64_t g1 = groups - g0 < 64 ? groups : g0 + 64;
    uint64_t special = 0;
    float mult = 0, mult_next = 0;
    bool ok = produce(g0, mult);
    for (int64_t g = g0; g < g1; ++g) {
      const bool ok_next = g + 1 < g1 && produce(g + 1, mult_next);
      if (__builtin_expect(ok, 1)) {
        GroupCode gc = fixed;
        gc.mv = _mm512_set1_ps(mult);
        quant_group_bf16<kStream, false>(buf + g * group, group, gc, out.q + g * group, /*fast_low=*/true,
                                         branch_free_groups);
      } else {
        special |= uint64_t(1) << (g - g0);
      }
      ok = ok_next, mult = mult_next;
    }
    for (; special; special &= special - 1) {
      const int64_t g = g0 + __builtin_ctzll(special);
      quant_row_e4m3_avx512(buf + g * group, DType::bf16, group, group, ue8m0, out.q + g * group,
                            out.scales + g * out.scale_stride, out.scale_stride, false, tp);
    }
  }
}

// quant_row_fused for the run-time input dtype and streaming.
template <class MakeStep>
[[gnu::always_inline]] inline bool quant_row_dispatch(DType t, int64_t n, int64_t group, bool ue8m0, uint16_t* buf,
                                                      const QuantRowOut& out, const TuningParams& tp,
                                                      MakeStep&& make_step) {
  if (group % 64 != 0 || n % group != 0 || reinterpret_cast<uintptr_t>(buf) % 64 != 0) return false;
  const bool stream = out.stream && reinterpret_cast<uintptr_t>(out.q) % 64 == 0;
  auto run = [&]<DType In>() {
    auto step = make_step.template operator()<In>();
    if (stream) quant_row_fused<In, true>(step, n, group, ue8m0, buf, out, tp);
    else quant_row_fused<In, false>(step, n, group, ue8m0, buf, out, tp);
  };
  if (t == DType::bf16) run.template operator()<DType::bf16>();
  else run.template operator()<DType::f32>();
  return true;
}

}  // namespace

// Under FlushSubnormals: GELU makes f32 subnormals far into either tail (the logistic's
// 2^-64-scaled parts, Phi and y itself for v < -10), and each costs an assist on Intel. The
// codes cannot change: every such value is below 16 * 2^-126, which times a multiplier of at
// most 448 / 1e-4 is far under e4m3's smallest half-ulp, so it codes as a zero of its sign
// either way (the sign from the bf16 word); a subnormal input is a zero of its sign as well.
// Not for silu-mul: there a subnormal silu(g) times a huge u can be a normal product.
bool gelu_quant_row_avx512(const void* x, DType t, int64_t n, bool erf_form, int64_t group, bool ue8m0,
                           uint16_t* buf, const QuantRowOut& out, const TuningParams& tp) {
  const FlushSubnormals flush;
  const int64_t ahead = tp.row_prefetch_bytes;
  if (erf_form)
    return quant_row_dispatch(t, n, group, ue8m0, buf, out, tp, [&]<DType In>() {
      return gelu_row<In>(x, ahead, [](auto v) { return gelu_erf<true>(v); }).first;
    });
  return quant_row_dispatch(t, n, group, ue8m0, buf, out, tp, [&]<DType In>() {
    return gelu_row<In>(x, ahead, [](auto v) { return gelu_tanh<true>(v); }).first;
  });
}

bool silu_mul_quant_row_avx512(const void* g, const void* u, DType t, int64_t n, const void* next_u, int64_t group,
                               bool ue8m0, uint16_t* buf, const QuantRowOut& out, const TuningParams& tp) {
  const int64_t ahead = tp.row_prefetch_bytes;
  return quant_row_dispatch(t, n, group, ue8m0, buf, out, tp,
                            [&]<DType In>() { return silu_mul_row<In, true>(g, u, n, next_u, ahead).first; });
}

void silu_mul_avx512(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool stream,
                     const void* next_u, const TuningParams& tp) {
  const int64_t ahead = tp.row_prefetch_bytes;
  with_dtypes(t, yt, [&]<DType In, DType Out>() {
    auto [step, single] = silu_mul_row<In, Out == DType::bf16>(g, u, n, next_u, ahead);
    map_row_pairs<In, Out>(y, n, stream, step, single);
  });
}

void silu_mul2_avx512(const SiluMulRow& a, const SiluMulRow& b, DType t, DType yt, int64_t n, bool stream,
                      const TuningParams& tp) {
  const int64_t ahead = tp.row_prefetch_bytes;
  with_dtypes(t, yt, [&]<DType In, DType Out>() {
    auto [step_a, single_a] = silu_mul_row<In, Out == DType::bf16>(a.g, a.u, n, a.next_u, ahead);
    auto [step_b, single_b] = silu_mul_row<In, Out == DType::bf16>(b.g, b.u, n, b.next_u, ahead);
    map_two_rows_pairs<In, Out>(a.y, b.y, n, stream, step_a, single_a, step_b, single_b);
  });
}

void gelu_avx512(const void* x, DType t, void* y, DType yt, int64_t n, bool erf_form, bool stream,
                 const TuningParams& tp) {
  const int64_t ahead = tp.row_prefetch_bytes;
  with_dtypes(t, yt, [&]<DType In, DType Out>() {
    with_gelu_form<Out>(erf_form, [&](auto f) {
      auto [step, single] = gelu_row<In>(x, ahead, f);
      map_row_pairs<In, Out>(y, n, stream, step, single);
    });
  });
}

void gelu2_avx512(const void* xa, void* ya, const void* xb, void* yb, DType t, DType yt, int64_t n, bool erf_form,
                  bool stream, const TuningParams& tp) {
  const int64_t ahead = tp.row_prefetch_bytes;
  with_dtypes(t, yt, [&]<DType In, DType Out>() {
    with_gelu_form<Out>(erf_form, [&](auto f) {
      auto [step_a, single_a] = gelu_row<In>(xa, ahead, f);
      auto [step_b, single_b] = gelu_row<In>(xb, ahead, f);
      map_two_rows_pairs<In, Out>(ya, yb, n, stream, step_a, single_a, step_b, single_b);
    });
  });
}

}  // namespace sol::kernels
