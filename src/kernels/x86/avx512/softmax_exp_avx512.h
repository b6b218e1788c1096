#pragma once
// The softmax op's exponential (AVX-512): a 16-entry table in a register and a cubic. Include
// only from *_avx512.cc files; anonymous namespace, as vec16.
#include "kernels/x86/avx512/pair_avx512.h"

namespace sol::kernels {
namespace {

// exp(d) for d <= 64 (or NaN): the softmax numerator (d = x - max <= 0), and the f32 kernel's
// per-lane sums (d = x - ref <= 64, softmax_two_pass_avx512.cc). A 16-entry table in a register
// turns the range reduction finer than exp_neg_in_range's: d = (k / 16) ln2 + s, |s| <= ln2 / 32,
// exp(d) = 2^floor(k / 16) * 2^((k mod 16) / 16) * exp(s), so exp(s) needs only a cubic (Taylor,
// 9e-9 relative on that interval) where the plain reduction needs degree 5: six operations on
// the FMA pipes per vector instead of seven (those pipes also carry every 512-bit store, and
// bound this loop by count), and a dependency chain ~10 cycles shorter (docs/perf/layer-ops.md).
//  - k / 16: one fma with the shifter 1.5 * 2^19 rounds d / ln2 to a multiple of 1/16 (its
//    last ulp while the sum stays in [2^19, 2^20): d / ln2 in [-150, 93] here); subtracting the shifter gives k / 16 exactly, and the low 4 bits of the sum's
//    bits are k mod 16, which is what vpermps reads as its index (no conversion).
//  - s = d - (k / 16) ln2 by one fma with ln2 in f32 (relative error 2.7e-9 of the product,
//    |k / 16| <= 150: < 3e-7 in the result, as exp_neg_in_range's reduction).
//  - For 0 < d <= 64 the result is at most e^64 ~ 6e27 and vscalefps scales by at most 2^92.
//  - vscalefps applies 2^floor(k / 16) and saturates to 0 below the subnormals.
// d is clamped to -104 first (exp(-104) rounds to 0 in f32), so -inf inputs give exactly 0
// instead of meeting inf - inf (Zen 5 happens to return 0 for vscalefps(NaN, -inf) too, but
// the ISA reference says NaN); the constant goes first so that a NaN d stays NaN (vmaxps
// returns its second operand then).
// kLinear: exp(s) ~ 1 + s instead of the cubic (within s^2 / 2 = 2.4e-4 relative, always
// below): t exp(s) ~ t + t s is one fma, three FMA-pipe operations fewer per vector. For bf16
// outputs only, whose 8 significant bits that error cannot move by more than one ulp
// (sol/softmax.h).
template <class V, bool kLinear = false> [[gnu::always_inline]] inline V softmax_exp(V d) {
  const __m512 table = _mm512_setr_ps(1.0f, 1.04427378242741384f, 1.09050773266525766f, 1.13878863475669165f,
                                      1.18920711500272107f, 1.24185781207348405f, 1.29683955465100967f,
                                      1.35425554693689273f, 1.41421356237309505f, 1.47682614593949931f,
                                      1.54221082540794082f, 1.61049033194925431f, 1.68179283050742909f,
                                      1.75625216037329948f, 1.83400808640934246f, 1.91520656139714729f);
  d = each([](__m512 v) { return _mm512_max_ps(_mm512_set1_ps(-104.0f), v); }, d);
  const V shifted = fmadd(d, splat<V>(1.44269504088896341f), splat<V>(786432.0f));  // 1.5 * 2^19
  const V k16 = sub(shifted, splat<V>(786432.0f));
  const V s = fmadd(k16, splat<V>(-0.693147182464599609375f), d);
  const V t = each([&](__m512 v) { return _mm512_permutexvar_ps(_mm512_castps_si512(v), table); }, shifted);
  V e;
  if constexpr (kLinear) {
    e = fmadd(t, s, t);
  } else {
    V q = fmadd(splat<V>(0.166666671633720398f), s, splat<V>(0.5f));
    q = fmadd(q, s, splat<V>(1.0f));
    e = fmadd(mul(t, s), q, t);  // t exp(s) = t + t s q(s)
  }
  return each([](__m512 a, __m512 b) { return _mm512_scalef_ps(a, b); }, e, k16);
}

}  // namespace
}  // namespace sol::kernels
