// AVX-512 softmax row: three passes, 32 elements per step (pair_avx512.h), the exponentials
// kept in an f32 scratch row between the sum and the scaling (L1-sized for LLM rows).
#include <cmath>

#include "kernels/softmax.h"
#include "kernels/x86/avx512/pair_avx512.h"
#include "kernels/x86/avx512/softmax_exp_avx512.h"

namespace sol::kernels {

namespace {

// kTableExp: softmax_exp (the softmax op's rows, same bits as softmax_rows; its first-degree
// form for bf16 outputs, within one ulp of them); else
// pair_avx512.h's exp_neg_of_nonnegative on max - x, the bits route_softmax_lanes promises
// (kernels/route.h).
template <DType In, DType Out, bool kTableExp>
void softmax_row(const void* x, void* y, int64_t n, float* scratch, bool stream, int64_t ahead) {
  constexpr int64_t es = In == DType::bf16 ? 2 : 4;
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  // Pass 1: the maximum of the numbers (vmaxps drops NaN). A NaN, +inf or an all -inf row
  // needs no test of its own: max - x is NaN somewhere, so is the sum, and 1 / sum makes every
  // output NaN, as sol/softmax.h says. Order does not matter for a maximum, so bf16 lines are
  // taken as even / odd elements.
  __m512 mx0 = minus_inf, mx1 = minus_inf;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_ahead(x, i * es, ahead);  // passes 2 and 3 run from L1/L2; this one streams from memory
    if constexpr (es == 4) prefetch_ahead(x, i * es + 64, ahead);
    const Pair v = load_pair<In>(x, i);
    mx0 = _mm512_max_ps(mx0, v.a);
    mx1 = _mm512_max_ps(mx1, v.b);
  }
  for (; i < n; i += 16) mx0 = _mm512_max_ps(mx0, _mm512_mask_mov_ps(minus_inf, tail_mask(n - i), load16(x, In, i, tail_mask(n - i))));
  const float max = _mm512_reduce_max_ps(_mm512_max_ps(mx0, mx1));
  // Pass 2: exp(x - max) = exp(-(max - x)) with max - x >= 0 (or NaN), into scratch in the
  // steps' layout (pairs from element 0, then element order), and its sum in 32 partial sums
  // in a fixed order: the same for every output dtype and alignment.
  auto exp_step = [&](auto v) {
    using V = decltype(v);
    if constexpr (kTableExp) return softmax_exp<V, Out == DType::bf16>(sub(v, splat<V>(max)));
    else return exp_neg_of_nonnegative(sub(splat<V>(max), v));
  };
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  constexpr int64_t ys = Out == DType::bf16 ? 2 : 4;
  const bool aligned_stream = stream && reinterpret_cast<uintptr_t>(y) % 64 == 0;
  i = 0;
  // Passes 2 and 3 are arithmetic on cached lines; without help the next row's lines would be
  // fetched only when pass 1 of the next call asks for them, so DRAM would sit idle here and
  // the arithmetic there. Rows are contiguous (softmax takes contiguous tensors), so the next
  // row starts at x + n: its lines are requested here, one per 32 elements (two for f32).
  const char* next_row = static_cast<const char*>(x) + n * es;
  for (; i + 32 <= n; i += 32) {
    __builtin_prefetch(next_row + i * es);
    if constexpr (es == 4) __builtin_prefetch(next_row + i * es + 64);
    // A cached output (decode-sized calls) is owned here, before pass 3 stores into it: its
    // reads for ownership then overlap the arithmetic instead of stalling the stores
    // (docs/perf/layer-ops.md). f32 rows (x, y and the scratch: 84 KiB) lost with it.
    if (es == 2 && !aligned_stream) {
      __builtin_prefetch(static_cast<char*>(y) + i * ys, 1);
      if constexpr (ys == 4) __builtin_prefetch(static_cast<char*>(y) + i * ys + 64, 1);
    }
    const Pair e = exp_step(load_pair<In>(x, i));
    _mm512_storeu_ps(scratch + i, e.a);
    _mm512_storeu_ps(scratch + i + 16, e.b);
    acc0 = _mm512_add_ps(acc0, e.a);
    acc1 = _mm512_add_ps(acc1, e.b);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(m, exp_step(load16(x, In, i, m)));
    _mm512_mask_storeu_ps(scratch + i, m, e);
    acc0 = _mm512_add_ps(acc0, e);
  }
  alignas(64) float part[16];
  _mm512_store_ps(part, _mm512_add_ps(acc0, acc1));
  float sum = 0;
  for (float p : part) sum += p;
  // Pass 3: scale and store, in pass 2's steps (a row whose output is off a 64-byte line is
  // not streamed: its lines would straddle the steps).
  const __m512 inv = _mm512_set1_ps(1.0f / sum);
  i = 0;
  for (; i + 32 <= n; i += 32)
    store_pair<In, Out>(y, i, {_mm512_mul_ps(_mm512_loadu_ps(scratch + i), inv), _mm512_mul_ps(_mm512_loadu_ps(scratch + i + 16), inv)},
                        aligned_stream);
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    store16_fast(y, Out, i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, scratch + i), inv));
  }
  if (aligned_stream) _mm_sfence();
}

// The pipelined form for many rows (softmax_rows_avx512): row r's pass 2, row r - 1's pass 3
// and row r + 1's pass 1 in one loop, so the write stream (pass 3), the arithmetic (pass 2) and
// the read stream (pass 1) overlap instead of taking turns. Each pass does, per row, exactly
// what softmax_row does (same steps, same partial sums in the same order): same bits.

// Pass 1 over memory: the maximum of a bf16 row from its bit patterns, on the integer pipes
// (the FADD pipes, which carry the exponential's adds and vscalefps, bind this loop; vmaxps and
// the widening shift would take three of their slots per 32 elements). Read as signed 16-bit
// integers the patterns order the non-negative numbers; read unsigned, the negative ones in
// reverse. So the maximum is the signed maximum when that is >= 0 (+0 and up), else the
// unsigned minimum (every number negative). A positive NaN or +inf wins the signed maximum and a
// negative NaN reaches the sum through its own exponential: every output NaN, as with vmaxps
// (see softmax_row); a row without NaN gets exactly vmaxps's maximum (up to the sign of 0).
struct Bf16Max {
  __m512i smax = _mm512_set1_epi16(int16_t(0x8000)), umin = _mm512_set1_epi16(-1);
  [[gnu::always_inline]] void line(const void* x, int64_t i) {
    const __m512i w = _mm512_loadu_si512(static_cast<const uint16_t*>(x) + i);
    smax = _mm512_max_epi16(smax, w);
    umin = _mm512_min_epu16(umin, w);
  }
  // Elements [i, n), fewer than 32, then the maximum.
  [[gnu::always_inline]] float finish(const void* x, int64_t i, int64_t n) {
    if (i < n) {
      const __mmask32 m = n - i >= 32 ? ~__mmask32(0) : __mmask32((1u << (n - i)) - 1);
      const __m512i w = _mm512_maskz_loadu_epi16(m, static_cast<const uint16_t*>(x) + i);
      smax = _mm512_mask_max_epi16(smax, m, smax, w);
      umin = _mm512_mask_min_epu16(umin, m, umin, w);
    }
    const __m256i s = _mm256_max_epi16(_mm512_castsi512_si256(smax), _mm512_extracti64x4_epi64(smax, 1));
    const __m256i u = _mm256_min_epu16(_mm512_castsi512_si256(umin), _mm512_extracti64x4_epi64(umin, 1));
    alignas(32) int16_t sw[16];
    alignas(32) uint16_t uw[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(sw), s);
    _mm256_store_si256(reinterpret_cast<__m256i*>(uw), u);
    int16_t smax_word = sw[0];
    uint16_t umin_word = uw[0];
    for (int k = 1; k < 16; ++k) {
      smax_word = std::max(smax_word, sw[k]);
      umin_word = std::min(umin_word, uw[k]);
    }
    return bf16_to_f32(smax_word >= 0 ? uint16_t(smax_word) : umin_word);
  }
};

// One row's pass 3 state: its exponentials, 1 / sum and where its output goes.
struct Scaled {
  const float* exps;
  void* y;
  __m512 inv;
  bool stream;  // y starts on a 64-byte line and the output streams
};

// One sweep: pass 2 of row x (max known: exps into `exps`, returns the sum), with kStore pass 3
// of `prev`, with kMax pass 1 of `next` (its maximum into *next_max, its lines read as they
// come in). ahead: bytes from `next` to the row after it (0: none), prefetched. (f32 rows, twice
// the lines per element, take softmax_two_pass_avx512.cc instead: their scratch rows and the
// rows around them do not fit L1.)
template <DType In, DType Out, bool kStore, bool kMax>
float sweep(const void* x, float max, float* exps, int64_t n, const Scaled& prev, const void* next, float* next_max,
            int64_t ahead) {
  static_assert(In == DType::bf16, "f32 rows take softmax_two_pass_avx512.cc");
  constexpr int64_t es = 2;
  auto exp_step = [&](auto v) {
    using V = decltype(v);
    return softmax_exp<V, Out == DType::bf16>(sub(v, splat<V>(max)));
  };
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  Bf16Max next_row_max;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    if constexpr (kMax) {
      next_row_max.line(next, i);
      if (ahead != 0) __builtin_prefetch(static_cast<const char*>(next) + ahead + i * es);
    }
    const Pair e = exp_step(load_pair<In>(x, i));
    _mm512_storeu_ps(exps + i, e.a);
    _mm512_storeu_ps(exps + i + 16, e.b);
    acc0 = _mm512_add_ps(acc0, e.a);
    acc1 = _mm512_add_ps(acc1, e.b);
    if constexpr (kStore)
      store_pair<In, Out>(prev.y, i, {_mm512_mul_ps(_mm512_loadu_ps(prev.exps + i), prev.inv),
                                      _mm512_mul_ps(_mm512_loadu_ps(prev.exps + i + 16), prev.inv)}, prev.stream);
  }
  if constexpr (kMax) *next_max = next_row_max.finish(next, i, n);
  for (int64_t j = i; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    const __m512 e = _mm512_maskz_mov_ps(m, exp_step(load16(x, In, j, m)));
    _mm512_mask_storeu_ps(exps + j, m, e);
    acc0 = _mm512_add_ps(acc0, e);
    if constexpr (kStore) store16_fast(prev.y, Out, j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, prev.exps + j), prev.inv));
  }
  alignas(64) float part[16];
  _mm512_store_ps(part, _mm512_add_ps(acc0, acc1));
  float sum = 0;
  for (float p : part) sum += p;
  return sum;
}

template <DType In, DType Out>
void softmax_rows(const char* x, int64_t xs, char* y, int64_t ys, int64_t rows, int64_t n, float* scratch, bool stream,
                  int64_t ahead) {
  static_assert(In == DType::bf16, "f32 rows take softmax_two_pass_avx512.cc");
  if (rows <= 0) return;
  constexpr int64_t es = 2;
  float max;
  {  // pass 1 of row 0 alone
    Bf16Max row_max;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      prefetch_ahead(x, i * es, ahead);
      if (rows > 1) __builtin_prefetch(x + xs + i * es);
      row_max.line(x, i);
    }
    max = row_max.finish(x, i, n);
  }
  Scaled prev{};
  for (int64_t r = 0; r < rows; ++r) {
    float* exps = scratch + (r % 2) * n;
    const char* xr = x + r * xs;
    const char* next = x + (r + 1) * xs;
    float next_max = 0;
    const bool first = r == 0, last = r + 1 == rows;
    float sum;
    if (first && last) sum = sweep<In, Out, false, false>(xr, max, exps, n, prev, nullptr, nullptr, 0);
    else if (first) sum = sweep<In, Out, false, true>(xr, max, exps, n, prev, next, &next_max, r + 2 < rows ? xs : 0);
    else if (last) sum = sweep<In, Out, true, false>(xr, max, exps, n, prev, nullptr, nullptr, 0);
    else sum = sweep<In, Out, true, true>(xr, max, exps, n, prev, next, &next_max, r + 2 < rows ? xs : 0);
    char* yr = y + r * ys;
    prev = {exps, yr, _mm512_set1_ps(1.0f / sum), stream && reinterpret_cast<uintptr_t>(yr) % 64 == 0};
    max = next_max;
  }
  // pass 3 of the last row alone
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    store_pair<In, Out>(prev.y, i, {_mm512_mul_ps(_mm512_loadu_ps(prev.exps + i), prev.inv),
                                    _mm512_mul_ps(_mm512_loadu_ps(prev.exps + i + 16), prev.inv)}, prev.stream);
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    store16_fast(prev.y, Out, i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, prev.exps + i), prev.inv));
  }
  // One fence for all the rows' non-temporal stores, before the caller (or another thread)
  // reads y: a fence per row waited for each row's lines to drain.
  if (stream) _mm_sfence();
}

}  // namespace

void softmax_row_avx512(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch, bool stream,
                        const TuningParams& tp) {
  const int64_t ahead = tp.row_prefetch_bytes;
  with_dtypes(t, yt, [&]<DType In, DType Out>() { softmax_row<In, Out, false>(x, y, n, scratch, stream, ahead); });
}

void softmax_op_row_avx512(const uint16_t* x, void* y, DType yt, int64_t n, float* scratch, bool stream,
                           const TuningParams& tp) {
  const int64_t ahead = tp.row_prefetch_bytes;
  if (yt == DType::bf16) softmax_row<DType::bf16, DType::bf16, true>(x, y, n, scratch, stream, ahead);
  else softmax_row<DType::bf16, DType::f32, true>(x, y, n, scratch, stream, ahead);
}

}  // namespace sol::kernels

namespace sol::kernels {

void softmax_rows_avx512(const uint16_t* x, int64_t x_row_bytes, void* y, int64_t y_row_bytes, DType yt, int64_t rows,
                         int64_t n, float* scratch, bool stream, const TuningParams& tp) {
  const char* xc = reinterpret_cast<const char*>(x);
  char* yc = static_cast<char*>(y);
  const int64_t ahead = tp.row_prefetch_bytes;
  if (yt == DType::bf16)
    softmax_rows<DType::bf16, DType::bf16>(xc, x_row_bytes, yc, y_row_bytes, rows, n, scratch, stream, ahead);
  else softmax_rows<DType::bf16, DType::f32>(xc, x_row_bytes, yc, y_row_bytes, rows, n, scratch, stream, ahead);
}

}  // namespace sol::kernels
