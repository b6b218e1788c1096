// AVX-512 softmax of f32 rows in two passes and no scratch row.
//
// Why not the three-pass kernel with its scratch rows (softmax_avx512.cc), which computes each
// exponential once: for f32 rows its memory pattern alone, with the arithmetic taken out, ran as
// slowly as the whole kernel, well behind a plain copy of the same bytes. Two 28 KiB scratch rows and the rows around them do not fit the 48 KiB L1, and the
// maximum of the next row, a loop of its own, left DRAM idle. Here pass 1 takes the maximum and
// the sum of exponentials in one read, and pass 2 computes each exponential again for the
// output: twice the exponentials, but the arithmetic still fits under the memory time
// (docs/perf/layer-ops.md), and many rows run as one sweep per row: pass 2 of row r,
// pass 1 of row r + 1.
//
// Pass 1 keeps, per lane, a reference ref and the sum of exp(x - ref). A chunk of 256 elements
// is read for its maximum first (from memory), then for its exponentials (from L1); ref is raised
// to the chunk's maximum, and the sum rescaled by exp(ref_old - ref_new), only when that maximum
// lies more than 64 above ref, so exp(x - ref) <= e^64 never overflows (nor does a sum of fewer
// than 2^60 terms) and the rescale runs about once per row. The row's sum is then
// sum over lanes of sum_lane * exp(ref_lane - max). ref starts at -FLT_MAX, not -inf, so that a
// lane of -inf entries adds exp(-inf) = 0 instead of NaN. A NaN entry makes its lane's sum NaN,
// a +inf entry makes inf - inf there, and an all -inf row gives exp(+inf) * 0 = NaN at the end:
// every output NaN, as sol/softmax.h says and the three-pass kernel does.
#include <cfloat>
#include <cmath>

#include "kernels/softmax.h"
#include "kernels/x86/avx512/softmax_exp_avx512.h"

namespace sol::kernels {

namespace {

constexpr int64_t kChunk = 256;     // elements per chunk of pass 1 (1 KiB: stays in L1 between its two reads)
constexpr float kRefMargin = 64.0f;  // exp(64) ~ 6e27: sums of up to 2^60 such terms stay finite

// Pass 1's state per lane (a: elements [0, 16) of each 32-element step and the row's tail,
// b: elements [16, 32)).
struct LaneSums {
  __m512 ref_a, ref_b;  // the reference each lane's exponentials are taken against
  __m512 sum_a, sum_b;  // the sum of exp(x - ref)
  __m512 max_a, max_b;  // the running maximum (vmaxps drops NaN; a NaN reaches the sum instead)
};

[[gnu::always_inline]] inline LaneSums start_sums() {
  const __m512 lowest = _mm512_set1_ps(-FLT_MAX), minus_inf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
  return {lowest, lowest, zero, zero, minus_inf, minus_inf};
}

// Takes a chunk's maxima before its exponentials: raises ref where the chunk would overflow.
[[gnu::always_inline]] inline void take_chunk_max(LaneSums& s, __m512 cm_a, __m512 cm_b) {
  s.max_a = _mm512_max_ps(s.max_a, cm_a);
  s.max_b = _mm512_max_ps(s.max_b, cm_b);
  const __m512 margin = _mm512_set1_ps(kRefMargin);
  const __mmask16 up = _mm512_cmp_ps_mask(cm_a, _mm512_add_ps(s.ref_a, margin), _CMP_GT_OQ) |
                       _mm512_cmp_ps_mask(cm_b, _mm512_add_ps(s.ref_b, margin), _CMP_GT_OQ);
  if (__builtin_expect(up != 0, 0)) {
    const __m512 ref_a = _mm512_max_ps(s.ref_a, cm_a), ref_b = _mm512_max_ps(s.ref_b, cm_b);
    s.sum_a = _mm512_mul_ps(s.sum_a, softmax_exp(_mm512_sub_ps(s.ref_a, ref_a)));
    s.sum_b = _mm512_mul_ps(s.sum_b, softmax_exp(_mm512_sub_ps(s.ref_b, ref_b)));
    s.ref_a = ref_a;
    s.ref_b = ref_b;
  }
}

// Pass 1 over row x: chunk by chunk, its maximum, then its exponentials; per_step(i) runs beside
// the exponentials of the step at i (the caller's prefetches, and in a sweep the previous row's
// outputs), so it sees every whole step [0, n / 32 * 32) once, in order.
template <class PerStep>
[[gnu::always_inline]] inline void sum_row(LaneSums& s, const float* x, int64_t n, PerStep&& per_step) {
  const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
  const int64_t whole = n / 32 * 32;
  for (int64_t i = 0; i < whole; i += kChunk) {
    const int64_t end = std::min(i + kChunk, whole);
    __m512 cm_a = minus_inf, cm_b = minus_inf;
    for (int64_t j = i; j < end; j += 32) {
      cm_a = _mm512_max_ps(cm_a, _mm512_loadu_ps(x + j));
      cm_b = _mm512_max_ps(cm_b, _mm512_loadu_ps(x + j + 16));
    }
    take_chunk_max(s, cm_a, cm_b);
    for (int64_t j = i; j < end; j += 32) {
      const Pair e = softmax_exp(Pair{_mm512_sub_ps(_mm512_loadu_ps(x + j), s.ref_a), _mm512_sub_ps(_mm512_loadu_ps(x + j + 16), s.ref_b)});
      s.sum_a = _mm512_add_ps(s.sum_a, e.a);
      s.sum_b = _mm512_add_ps(s.sum_b, e.b);
      per_step(j);
    }
  }
  if (whole == n) return;
  // The last n % 32 elements: one more chunk, in lanes a.
  __m512 cm = minus_inf;
  for (int64_t j = whole; j < n; j += 16) cm = _mm512_max_ps(cm, _mm512_mask_loadu_ps(minus_inf, tail_mask(n - j), x + j));
  take_chunk_max(s, cm, minus_inf);
  for (int64_t j = whole; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    s.sum_a = _mm512_add_ps(s.sum_a, _mm512_maskz_mov_ps(m, softmax_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), s.ref_a))));
  }
}

// The row's maximum, and into *sum the sum of exp(x - max): each lane's sum brought from its
// reference to the maximum, the lanes added in a fixed order.
[[gnu::always_inline]] inline float finish_sums(const LaneSums& s, float* sum) {
  const float max = _mm512_reduce_max_ps(_mm512_max_ps(s.max_a, s.max_b));
  const __m512 m = _mm512_set1_ps(max);
  alignas(64) float part[16];
  _mm512_store_ps(part, _mm512_fmadd_ps(s.sum_a, softmax_exp(_mm512_sub_ps(s.ref_a, m)),
                                        _mm512_mul_ps(s.sum_b, softmax_exp(_mm512_sub_ps(s.ref_b, m)))));
  float total = 0;
  for (float p : part) total += p;
  *sum = total;
  return max;
}

// Pass 2: exp(x - max) * inv for the step at i, or for the elements i.. in lanes m.
template <DType Out>
[[gnu::always_inline]] inline void out_step(const float* x, int64_t i, __m512 max, __m512 inv, void* y, bool stream) {
  const Pair e = softmax_exp(Pair{_mm512_sub_ps(_mm512_loadu_ps(x + i), max), _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), max)});
  store_pair<DType::f32, Out>(y, i, {_mm512_mul_ps(e.a, inv), _mm512_mul_ps(e.b, inv)}, stream);
}

template <DType Out>
[[gnu::always_inline]] inline void out_tail(const float* x, int64_t n, __m512 max, __m512 inv, void* y) {
  for (int64_t j = n / 32 * 32; j < n; j += 16) {
    const __mmask16 m = tail_mask(n - j);
    store16_fast(y, Out, j, m, _mm512_mul_ps(softmax_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), max)), inv));
  }
}

[[gnu::always_inline]] inline void prefetch_step(const char* p) {
  __builtin_prefetch(p);
  __builtin_prefetch(p + 64);
}

template <DType Out>
void two_pass_row(const float* x, void* y, int64_t n, bool stream, int64_t ahead) {
  LaneSums s = start_sums();
  sum_row(s, x, n, [&](int64_t j) { prefetch_step(reinterpret_cast<const char*>(x + j) + ahead); });
  float sum;
  const __m512 max = _mm512_set1_ps(finish_sums(s, &sum)), inv = _mm512_set1_ps(1.0f / sum);
  // Pass 2 runs from cache; rows are contiguous (the op takes contiguous tensors), so the next
  // row, at x + n, is requested meanwhile (as the three-pass kernel does).
  const char* next_row = reinterpret_cast<const char*>(x + n);
  const bool aligned_stream = stream && reinterpret_cast<uintptr_t>(y) % 64 == 0;
  const int64_t whole = n / 32 * 32;
  for (int64_t i = 0; i < whole; i += 32) {
    prefetch_step(next_row + i * 4);
    out_step<Out>(x, i, max, inv, y, aligned_stream);
  }
  out_tail<Out>(x, n, max, inv, y);
  if (aligned_stream) _mm_sfence();
}

// Many rows, one sweep per row: pass 2 of row r beside pass 1 of row r + 1. Pass 1's reads are
// requested `ahead` bytes ahead, on into the rows after (the rows are contiguous), within the
// thread's rows. Pass 2 runs over its row backwards: the lines pass 1 read last, in the previous
// sweep, are the ones still in L1, so half the row is re-read from L1 instead of L2 (as the
// norms' output loops do). Each output is computed the same way in either order: same bits.
template <DType Out>
void two_pass_rows(const char* x, int64_t xs, char* y, int64_t ys, int64_t rows, int64_t n, bool stream,
                   int64_t ahead) {
  if (rows <= 0) return;
  const int64_t requested_bytes = rows * xs - ahead;  // steps at or past this request nothing
  auto request = [&](const char* at) __attribute__((always_inline)) {
    if (at - x < requested_bytes) prefetch_step(at + ahead);
  };
  LaneSums s = start_sums();
  sum_row(s, reinterpret_cast<const float*>(x), n, [&](int64_t j) { request(x + j * 4); });  // pass 1 of row 0
  float sum;
  float max = finish_sums(s, &sum);
  const int64_t last_step = n / 32 * 32 - 32;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = reinterpret_cast<const float*>(x + r * xs);
    char* yr = y + r * ys;
    const bool row_stream = stream && reinterpret_cast<uintptr_t>(yr) % 64 == 0;
    const __m512 vmax = _mm512_set1_ps(max), inv = _mm512_set1_ps(1.0f / sum);
    if (r + 1 < rows) {  // pass 2 of row r (backwards), pass 1 of row r + 1
      LaneSums t = start_sums();
      const char* next = x + (r + 1) * xs;
      sum_row(t, reinterpret_cast<const float*>(next), n, [&](int64_t j) {
        request(next + j * 4);
        out_step<Out>(xr, last_step - j, vmax, inv, yr, row_stream);
      });
      max = finish_sums(t, &sum);
    } else {
      for (int64_t i = last_step; i >= 0; i -= 32) out_step<Out>(xr, i, vmax, inv, yr, row_stream);
    }
    out_tail<Out>(xr, n, vmax, inv, yr);
  }
  // One fence for all the rows' non-temporal stores, before the caller (or another thread)
  // reads y.
  if (stream) _mm_sfence();
}

template <class Kernel> [[gnu::always_inline]] inline void with_out_dtype(DType out, Kernel&& kernel) {
  if (out == DType::bf16) kernel.template operator()<DType::bf16>();
  else kernel.template operator()<DType::f32>();
}

}  // namespace

void softmax_two_pass_row_avx512(const float* x, void* y, DType yt, int64_t n, bool stream, const TuningParams& tp) {
  const int64_t ahead = tp.row_prefetch_bytes;
  with_out_dtype(yt, [&]<DType Out>() { two_pass_row<Out>(x, y, n, stream, ahead); });
}

void softmax_two_pass_rows_avx512(const float* x, int64_t x_row_bytes, void* y, int64_t y_row_bytes, DType yt,
                                  int64_t rows, int64_t n, bool stream, const TuningParams& tp) {
  const int64_t ahead = tp.pass_prefetch_bytes;
  with_out_dtype(yt, [&]<DType Out>() {
    two_pass_rows<Out>(reinterpret_cast<const char*>(x), x_row_bytes, static_cast<char*>(y), y_row_bytes, rows, n, stream,
                       ahead);
  });
}

}  // namespace sol::kernels
