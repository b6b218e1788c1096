#pragma once
// Elementwise row kernels, 32 elements per step (on top of fast16_avx512.h). Include only from
// *_avx512.cc files; anonymous namespace, as vec16.
//
// Why 32 at a time: one 64-byte line of bf16 holds 32 elements, and the even and odd ones widen
// to f32 with one shift and one and (no shuffle: 1 op per 16 elements instead of 2), giving two
// independent vectors whose math can interleave. The results go back into element order with
// one vcvtne2ps2bf16 and one vpermw per line. For f32 rows a step is two consecutive vectors.
// The math is written once over `V` (a __m512 or a Pair) with the per-vector helpers below, so
// the 32-wide main loop and the masked 16-wide ends compute every element identically.
#include <cstdint>

#include "kernels/x86/avx512/fast16_avx512.h"

namespace sol::kernels {
namespace {

struct Pair {
  __m512 a, b;  // bf16 rows: even and odd elements of 32; f32 rows: elements [0, 16) and [16, 32)
};

// f(x...) on each vector of V (a __m512 or a Pair): the step of both halves of a Pair is issued
// together, so their two dependency chains overlap.
template <class F>
[[gnu::always_inline]] inline __m512 each(F&& f, __m512 x) { return f(x); }
template <class F>
[[gnu::always_inline]] inline Pair each(F&& f, Pair x) { return {f(x.a), f(x.b)}; }
template <class F>
[[gnu::always_inline]] inline __m512 each(F&& f, __m512 x, __m512 y) { return f(x, y); }
template <class F>
[[gnu::always_inline]] inline Pair each(F&& f, Pair x, Pair y) { return {f(x.a, y.a), f(x.b, y.b)}; }
template <class F>
[[gnu::always_inline]] inline __m512 each(F&& f, __m512 x, __m512 y, __m512 z) { return f(x, y, z); }
template <class F>
[[gnu::always_inline]] inline Pair each(F&& f, Pair x, Pair y, Pair z) { return {f(x.a, y.a, z.a), f(x.b, y.b, z.b)}; }

template <class V> [[gnu::always_inline]] inline V splat(float c);
template <> [[gnu::always_inline]] inline __m512 splat<__m512>(float c) { return _mm512_set1_ps(c); }
template <> [[gnu::always_inline]] inline Pair splat<Pair>(float c) { return {_mm512_set1_ps(c), _mm512_set1_ps(c)}; }

template <class V> [[gnu::always_inline]] inline V add(V x, V y) { return each([](__m512 p, __m512 q) { return _mm512_add_ps(p, q); }, x, y); }
template <class V> [[gnu::always_inline]] inline V sub(V x, V y) { return each([](__m512 p, __m512 q) { return _mm512_sub_ps(p, q); }, x, y); }
template <class V> [[gnu::always_inline]] inline V mul(V x, V y) { return each([](__m512 p, __m512 q) { return _mm512_mul_ps(p, q); }, x, y); }
template <class V> [[gnu::always_inline]] inline V div(V x, V y) { return each([](__m512 p, __m512 q) { return _mm512_div_ps(p, q); }, x, y); }
template <class V> [[gnu::always_inline]] inline V fmadd(V x, V y, V z) {
  return each([](__m512 p, __m512 q, __m512 r) { return _mm512_fmadd_ps(p, q, r); }, x, y, z);
}

// exp(-g) for g already clamped to [-89, 104] (or NaN): x = -g = n ln2 + r, |r| <= ln2 / 2,
// computed as s = -r = g + n ln2 with one f32 ln2 (its error, 1.9e-9 relative, times |n| <= 150
// stays below 3e-7), a degree-5 minimax polynomial for exp(r) = P(-s) (relative error 9e-8,
// 1.7e-7 after f32 rounding: odd coefficients negated, fitted by Lawson's iteration on the
// interval), and vscalefps for 2^n, which saturates to inf / 0 instead of wrapping the
// exponent. About 3 ulp for arguments near 0 and up to 8 near the ends of the range; two
// operations fewer than exp16 (vec16_avx512.h: second ln2 constant and degree 6, ~2 ulp).
// kDegree4: a degree-4 minimax fit instead (relative error 2.7e-6 after f32 Horner, one
// operation fewer), for gelu's tanh form, whose tests ask 1e-5 (silu and softmax ask 1e-6).
template <class V, bool kDegree4 = false> [[gnu::always_inline]] inline V exp_neg_in_range(V g) {
  const V n = each([](__m512 x) {
    return _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(-1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }, g);
  const V s = fmadd(n, splat<V>(0.693147182464599609375f), g);
  V p;
  if constexpr (kDegree4) {
    p = splat<V>(0.041458599269390106f);
    p = fmadd(p, s, splat<V>(-0.16790907084941864f));
    p = fmadd(p, s, splat<V>(0.5000435709953308f));
    p = fmadd(p, s, splat<V>(-0.9999634027481079f));
    p = fmadd(p, s, splat<V>(0.9999992847442627f));
  } else {
    p = splat<V>(-0.008290315978229046f);
    p = fmadd(p, s, splat<V>(0.04189793020486832f));
    p = fmadd(p, s, splat<V>(-0.1666763573884964f));
    p = fmadd(p, s, splat<V>(0.4999915063381195f));
    p = fmadd(p, s, splat<V>(-0.9999997019767761f));
    p = fmadd(p, s, splat<V>(1.0f));
  }
  return each([](__m512 q, __m512 e) { return _mm512_scalef_ps(q, e); }, p, n);
}

// exp(-g) for the sigmoid family, which only needs 1 + exp(-g): one vrangeps clamps |g| to 89
// with g's sign (exp(89) is inf in f32; exp(-89) is below 2^-127, so 1 + exp(-g) is what exp16's
// clamp to [-104, 89] gives). vrangeps maps NaN to +-89, so a NaN g must reach the result
// through another operand (the callers multiply or divide by g itself).
template <class V, bool kDegree4 = false> [[gnu::always_inline]] inline V exp_neg_clamped89(V g) {
  return exp_neg_in_range<V, kDegree4>(each([](__m512 x) { return _mm512_range_ps(x, _mm512_set1_ps(89.0f), 0x02); }, g));
}

// exp(-g) for g >= -89: one vminps clamps g to 104, where exp(-g) is 0 in f32 (+inf included);
// the constant goes first, so a NaN g stays NaN (vminps returns its second operand then).
template <class V> [[gnu::always_inline]] inline V exp_neg_of_nonnegative(V g) {
  return exp_neg_in_range(each([](__m512 x) { return _mm512_min_ps(_mm512_set1_ps(104.0f), x); }, g));
}

// 32 elements at i (of a bf16 row: even / odd; f32: consecutive).
template <DType T> [[gnu::always_inline]] inline Pair load_pair(const void* p, int64_t i) {
  if constexpr (T == DType::bf16) {
    const __m512i w = _mm512_loadu_si512(static_cast<const uint16_t*>(p) + i);
    return {bf16_low_f32(w), bf16_high_f32(w)};
  } else {
    const float* f = static_cast<const float*>(p) + i;
    return {_mm512_loadu_ps(f), _mm512_loadu_ps(f + 16)};
  }
}

// Rounded bf16 bits of v in the low half of each 32-bit lane, as sol::f32_to_bf16 (the integer
// path of vec16's to_bf16, before its narrowing).
[[gnu::always_inline]] inline __m512i bf16_bits32(__m512 v) {
  const __m512i b = _mm512_castps_si512(v);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40)));
}

// The 32 bf16 of an even / odd pair in element order: vcvtne2ps2bf16 gives [even | odd], vpermw
// interleaves them. Subnormal results (read as zero by the instruction on Zen 5) take the
// integer rounding, which lands each pair of results in one 32-bit lane directly.
[[gnu::always_inline]] inline __m512i bf16_interleaved(Pair v) {
  if (__builtin_expect((_mm512_fpclass_ps_mask(v.a, 0x20) | _mm512_fpclass_ps_mask(v.b, 0x20)) != 0, 0))
    return _mm512_or_si512(bf16_bits32(v.a), _mm512_slli_epi32(bf16_bits32(v.b), 16));
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(v.b, v.a)));
}

[[gnu::always_inline]] inline void store_line(void* d, __m512i v, bool stream) {
  if (stream) _mm512_stream_si512(static_cast<__m512i*>(d), v);
  else _mm512_storeu_si512(d, v);
}

// Stores the 32 results of the step at i (input layout In) into y (Out) at element i; stream:
// non-temporal stores, y + i is then 64-byte aligned.
template <DType In, DType Out> [[gnu::always_inline]] inline void store_pair(void* y, int64_t i, Pair v, bool stream) {
  if constexpr (Out == DType::bf16) {
    void* d = static_cast<uint16_t*>(y) + i;
    store_line(d, In == DType::bf16 ? bf16_interleaved(v) : to_bf16x32(v.a, v.b), stream);
  } else {
    float* d = static_cast<float*>(y) + i;
    __m512 lo = v.a, hi = v.b;
    if constexpr (In == DType::bf16) {
      lo = _mm512_permutex2var_ps(v.a, _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0), v.b);
      hi = _mm512_permutex2var_ps(v.a, _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8), v.b);
    }
    store_line(d, _mm512_castps_si512(lo), stream);
    store_line(d + 16, _mm512_castps_si512(hi), stream);
  }
}

// y[0..n) = f over the row, with step(i) -> Pair the results of the 32 elements at i (input
// layout In) and single(i, m) -> __m512 those of elements i.. in lanes m, in element order (the
// unaligned head when streaming and the tail). stream: every whole line of y in the main loop
// is written non-temporally (see write_row in fast16_avx512.h).
template <DType In, DType Out, class Step, class Single>
[[gnu::always_inline]] inline void map_row_pairs(void* y, int64_t n, bool stream, Step&& step, Single&& single) {
  constexpr int64_t es = Out == DType::bf16 ? 2 : 4;
  const auto addr = reinterpret_cast<uintptr_t>(y);
  stream = stream && addr % es == 0;
  int64_t i = 0;
  if (stream) {
    const int64_t head = std::min<int64_t>(n, int64_t((64 - (addr & 63)) & 63) / es);
    for (; i < head; i += 16) store16_fast(y, Out, i, tail_mask(head - i), single(i, tail_mask(head - i)));
    i = head;
  }
  for (; i + 32 <= n; i += 32) store_pair<In, Out>(y, i, step(i), stream);
  for (; i < n; i += 16) store16_fast(y, Out, i, tail_mask(n - i), single(i, tail_mask(n - i)));
  if (stream) _mm_sfence();
}

// Two rows at once: map_row_pairs over rows A and B (results of stepA / stepB into ya / yb),
// their 32-element steps issued in turn, so the loads of the two rows are two independent
// streams for DRAM. Rows far apart in memory (the callers pair row r with one half a thread's
// range away) read ~10-20% faster this way than one after the other on this machine, while
// rows 14 KiB apart read slower (docs/perf/layer-ops.md). Same values as two calls;
// outputs whose lines start at different offsets take the two calls.
template <DType In, DType Out, class StepA, class SingleA, class StepB, class SingleB>
[[gnu::always_inline]] inline void map_two_rows_pairs(void* ya, void* yb, int64_t n, bool stream, StepA&& step_a,
                                                      SingleA&& single_a, StepB&& step_b, SingleB&& single_b) {
  constexpr int64_t es = Out == DType::bf16 ? 2 : 4;
  const auto addr_a = reinterpret_cast<uintptr_t>(ya), addr_b = reinterpret_cast<uintptr_t>(yb);
  stream = stream && addr_a % es == 0;
  if (stream && (addr_a & 63) != (addr_b & 63)) {
    map_row_pairs<In, Out>(ya, n, stream, step_a, single_a);
    map_row_pairs<In, Out>(yb, n, stream, step_b, single_b);
    return;
  }
  int64_t i = 0;
  if (stream) {
    const int64_t head = std::min<int64_t>(n, int64_t((64 - (addr_a & 63)) & 63) / es);
    for (; i < head; i += 16) {
      store16_fast(ya, Out, i, tail_mask(head - i), single_a(i, tail_mask(head - i)));
      store16_fast(yb, Out, i, tail_mask(head - i), single_b(i, tail_mask(head - i)));
    }
    i = head;
  }
  for (; i + 32 <= n; i += 32) {
    store_pair<In, Out>(ya, i, step_a(i), stream);
    store_pair<In, Out>(yb, i, step_b(i), stream);
  }
  for (; i < n; i += 16) {
    store16_fast(ya, Out, i, tail_mask(n - i), single_a(i, tail_mask(n - i)));
    store16_fast(yb, Out, i, tail_mask(n - i), single_b(i, tail_mask(n - i)));
  }
  if (stream) _mm_sfence();
}

// Calls kernel<In, Out>() for the run-time dtypes (f32 or bf16 each), so the loops carry no
// dtype tests.
template <class Kernel> [[gnu::always_inline]] inline void with_dtypes(DType in, DType out, Kernel&& kernel) {
  if (in == DType::bf16) {
    if (out == DType::bf16) kernel.template operator()<DType::bf16, DType::bf16>();
    else kernel.template operator()<DType::bf16, DType::f32>();
  } else {
    if (out == DType::bf16) kernel.template operator()<DType::f32, DType::bf16>();
    else kernel.template operator()<DType::f32, DType::f32>();
  }
}

}  // namespace
}  // namespace sol::kernels
