// AVX-512 row primitives of the norms (16-lane helpers in vec16_avx512.h).
//
// The sums keep four 16-lane accumulators (element i in partial sum i % 64, as the scalar path):
// one accumulator would chain every FMA on its 4-cycle latency, ~1,800 cycles for a 7168-wide row,
// more than the row's DRAM time. The row is read from memory by the first pass, which prefetches
// ahead; later passes find it in L1. The accumulators are four named variables, not an array:
// GCC 12 keeps an array of vectors in memory and stores it back on every iteration. Loops are
// templates on the element types so the dtype tests leave the loops; like every helper here they
// stay in the anonymous namespace, out of reach of the linker's merging with baseline code.
#include <algorithm>

#include "kernels/norm.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {

namespace {

// The hardware prefetchers alone leave a streaming row pass short of the copy rate once it does
// real work (as in the cast kernels): each pass that reads a row from memory requests its lines
// TuningParams::pass_prefetch_bytes ahead (read once per call, passed down as `ahead`).

template <DType T>
constexpr int64_t kBytes = T == DType::bf16 ? 2 : 4;

// Requests the lines holding 64 elements of type T, `ahead` bytes ahead of element i, into the
// cache level kHint names (L1 by default).
template <DType T, _mm_hint kHint = _MM_HINT_T0>
[[gnu::always_inline]] inline void prefetch64(const void* p, int64_t i, int64_t ahead) {
  const char* c = static_cast<const char*>(p) + i * kBytes<T> + ahead;
  for (int l = 0; l < int(kBytes<T>); ++l) _mm_prefetch(c + 64 * l, kHint);
}

// The output loops that sum the next row's statistics (write_row_bf16x32_next) also request
// that row into L2, TuningParams::pass_l2_prefetch_bytes ahead. Those loops touch each row twice (summed from DRAM, then
// read again one row later for the output), so the row being written, the row being summed,
// the weight and the L1 look-ahead (~50 KiB) overflow the 48 KiB L1 and the output's loads
// miss it; an L1 miss waits for a miss buffer, and the T0 look-ahead holds those for a DRAM
// latency when its lines are not in L2 yet. With the lines already on their way to L2, the T0
// requests finish at L2 latency (probe: -4 to -16% on 4096 x 7168 rmsnorm, one
// thread, at 12-16 KiB; `sol bench`: 16 KiB the better for rmsnorm, the two alike for
// layernorm; T1 instead of T0 lost).

// Sum of the 64 partial sums in the scalar path's order: lane k of (a0 + a1) + (a2 + a3), then
// the 16 lanes one after another.
float combine(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  alignas(64) float part[16];
  _mm512_store_ps(part, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  float s = 0;
  for (float p : part) s += p;
  return s;
}

// Elements before y + i is 64-byte aligned (y element-aligned), or -1 when it never is.
int64_t elements_to_line(const void* y, DType t) {
  const auto a = reinterpret_cast<uintptr_t>(y);
  const uintptr_t es = t == DType::bf16 ? 2 : 4;
  if (a % es) return -1;
  return int64_t((64 - a % 64) % 64 / es);
}

// The tail (fewer than 64 elements) of a four-accumulator sum: 16-lane steps into a0, a1, ...
template <class Step>
[[gnu::always_inline]] inline void tail_steps(int64_t i, int64_t n, __m512& a0, __m512& a1, __m512& a2,
                                              __m512& a3, Step&& step) {
  if (i < n) step(i, tail_mask(n - i), a0);
  if (i + 16 < n) step(i + 16, tail_mask(n - i - 16), a1);
  if (i + 32 < n) step(i + 32, tail_mask(n - i - 32), a2);
  if (i + 48 < n) step(i + 48, tail_mask(n - i - 48), a3);
}

// ---- bf16 rows: even and odd elements ----
//
// 32 bf16 widen to f32 with one shift (the even elements) and one and (the odd ones): no shuffle.
// Zen 5 runs 512-bit shuffles (vpmovzxwd) at about one per cycle, which made them the limit of
// the straight widening. The sums take this order as it is (kernels/norm.h); results are put
// back in element order by one vpermw per 32 after the bf16 rounding (the residual fusion; the
// norm's own output pass keeps the straight widening, which measured no slower).

[[gnu::always_inline]] inline __mmask32 mask32(int64_t k) {
  return k >= 32 ? ~__mmask32(0) : k <= 0 ? __mmask32(0) : __mmask32((1u << k) - 1);
}

[[gnu::always_inline]] inline __m512 even_of(__m512i z) { return _mm512_castsi512_ps(_mm512_slli_epi32(z, 16)); }
[[gnu::always_inline]] inline __m512 odd_of(__m512i z) {
  return _mm512_castsi512_ps(_mm512_and_si512(z, _mm512_set1_epi32(int(0xFFFF0000u))));
}

// Calls f(e0, o0, e1, o1, m) for each block of 64 bf16 (e: even, o: odd elements of the two
// halves; m: the valid lanes of each, all for full blocks; invalid lanes are 0).
struct Lanes4 {
  __mmask16 e0, o0, e1, o1;
};

template <class F>
[[gnu::always_inline]] inline void bf16_blocks64(const void* x, int64_t n, int64_t ahead, F&& f) {
  const auto* p = static_cast<const uint16_t*>(x);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    prefetch64<DType::bf16>(x, i, ahead);
    const __m512i z0 = _mm512_loadu_si512(p + i), z1 = _mm512_loadu_si512(p + i + 32);
    f(even_of(z0), odd_of(z0), even_of(z1), odd_of(z1), Lanes4{0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF});
  }
  if (i < n) {
    const int64_t r0 = std::min<int64_t>(n - i, 32), r1 = std::max<int64_t>(n - i - 32, 0);
    const __m512i z0 = _mm512_maskz_loadu_epi16(mask32(r0), p + i);
    const __m512i z1 = _mm512_maskz_loadu_epi16(mask32(r1), p + i + 32);
    f(even_of(z0), odd_of(z0), even_of(z1), odd_of(z1),
      Lanes4{tail_mask((r0 + 1) / 2), tail_mask(r0 / 2), tail_mask((r1 + 1) / 2), tail_mask(r1 / 2)});
  }
}

// Even results (16) and odd results (16) of one block of 32 -> 32 bf16 in element order.
[[gnu::always_inline]] inline __m512i bf16_even_odd_to_order(__m512 e, __m512 o) {
  __m512i eo;  // words 0-15: even elements, 16-31: odd ones
  if (__builtin_expect((_mm512_fpclass_ps_mask(e, 0x20) | _mm512_fpclass_ps_mask(o, 0x20)) != 0, 0))
    eo = _mm512_inserti64x4(_mm512_castsi256_si512(to_bf16(e)), to_bf16(o), 1);
  else
    eo = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(o, e));
  const __m512i order = _mm512_setr_epi32(0x00100000, 0x00110001, 0x00120002, 0x00130003, 0x00140004, 0x00150005,
                                          0x00160006, 0x00170007, 0x00180008, 0x00190009, 0x001A000A, 0x001B000B,
                                          0x001C000C, 0x001D000D, 0x001E000E, 0x001F000F);
  return _mm512_permutexvar_epi16(order, eo);
}

// Per-vector accumulations of the row reductions: acc + v, and acc + v * v.
struct AddValue {
  [[gnu::always_inline]] __m512 operator()(__m512 acc, __m512 v) const { return _mm512_add_ps(acc, v); }
};
struct AddSquare {
  [[gnu::always_inline]] __m512 operator()(__m512 acc, __m512 v) const { return _mm512_fmadd_ps(v, v, acc); }
};

// A bf16 row reduction fed one bf16_blocks64 block at a time: four accumulators (the even and
// odd halves of each 64), combined at the end. The plain reductions and the output loops that
// take the next row's statistics on the way share it, so their bits agree by construction.
template <class Add>
struct Reduce4 {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  [[gnu::always_inline]] void operator()(__m512 e0, __m512 o0, __m512 e1, __m512 o1, Lanes4) {
    const Add add;
    a0 = add(a0, e0);
    a1 = add(a1, o0);
    a2 = add(a2, e1);
    a3 = add(a3, o1);
  }
  [[gnu::always_inline]] float result() const { return combine(a0, a1, a2, a3); }
};

// The shifted sums of a bf16 row, sum(x - shift) and sum((x - shift)^2), fed likewise; masked
// lanes (past the row's end) add nothing.
struct ShiftedSums4 {
  __m512 sv;
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  explicit ShiftedSums4(float shift) : sv(_mm512_set1_ps(shift)) {}
  [[gnu::always_inline]] void step(__m512 v, __mmask16 m, __m512& a, __m512& b) const {
    const __m512 d = _mm512_maskz_sub_ps(m, v, sv);
    a = _mm512_add_ps(a, d);
    b = _mm512_fmadd_ps(d, d, b);
  }
  [[gnu::always_inline]] void operator()(__m512 e0, __m512 o0, __m512 e1, __m512 o1, Lanes4 m) {
    step(e0, m.e0, a0, b0);
    step(o0, m.o0, a1, b1);
    step(e1, m.e1, a2, b2);
    step(o1, m.o1, a3, b3);
  }
  [[gnu::always_inline]] void result(float* sum_d, float* sum_d2) const {
    *sum_d = combine(a0, a1, a2, a3);
    *sum_d2 = combine(b0, b1, b2, b3);
  }
};

template <class Add>
float reduce_bf16(const void* x, int64_t n, int64_t ahead) {
  Reduce4<Add> acc;
  bf16_blocks64(x, n, ahead, [&](__m512 e0, __m512 o0, __m512 e1, __m512 o1, Lanes4 m)
                          __attribute__((always_inline)) { acc(e0, o0, e1, o1, m); });
  return acc.result();
}

float sum_squares_bf16(const void* x, int64_t n, int64_t ahead) { return reduce_bf16<AddSquare>(x, n, ahead); }
float sum_bf16(const void* x, int64_t n, int64_t ahead) { return reduce_bf16<AddValue>(x, n, ahead); }

void shifted_sums_bf16(const void* x, float shift, int64_t n, float* sum_d, float* sum_d2, int64_t ahead) {
  ShiftedSums4 acc(shift);
  bf16_blocks64(x, n, ahead, [&](__m512 e0, __m512 o0, __m512 e1, __m512 o1, Lanes4 m)
                          __attribute__((always_inline)) { acc(e0, o0, e1, o1, m); });
  acc.result(sum_d, sum_d2);
}

// s = round_bf16(r + x) stored, and the sum of its squares, for bf16 x and r.
float add_sum_squares_bf16(const uint16_t* x, const uint16_t* r, uint16_t* s, int64_t n, int64_t ahead) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0;
  int64_t i = 0;
  // 32 elements at a time; the accumulators of the two halves of a block of 64 alternate.
  auto step = [&](int64_t j, __mmask32 m, __m512& ae, __m512& ao) __attribute__((always_inline)) {
    const __m512i zr = _mm512_maskz_loadu_epi16(m, r + j), zx = _mm512_maskz_loadu_epi16(m, x + j);
    const __m512i out = bf16_even_odd_to_order(_mm512_add_ps(even_of(zr), even_of(zx)),
                                               _mm512_add_ps(odd_of(zr), odd_of(zx)));
    _mm512_mask_storeu_epi16(s + j, m, out);
    const __m512i kept = _mm512_maskz_mov_epi16(m, out);
    const __m512 e = even_of(kept), o = odd_of(kept);
    ae = _mm512_fmadd_ps(e, e, ae);
    ao = _mm512_fmadd_ps(o, o, ao);
  };
  __m512 a2 = a0, a3 = a0;
  for (; i + 64 <= n; i += 64) {
    prefetch64<DType::bf16>(x, i, ahead);
    prefetch64<DType::bf16>(r, i, ahead);
    step(i, ~__mmask32(0), a0, a1);
    step(i + 32, ~__mmask32(0), a2, a3);
  }
  if (i < n) step(i, mask32(n - i), a0, a1);
  if (i + 32 < n) step(i + 32, mask32(n - i - 32), a2, a3);
  return combine(a0, a1, a2, a3);
}

// A row of T reduced into four accumulators (16-lane steps, 64 per iteration), combined.
template <DType T, class Add>
float reduce_t(const void* x, int64_t n, int64_t ahead, Add add) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  auto step = [&](int64_t j, __mmask16 m, __m512& acc) __attribute__((always_inline)) {
    acc = add(acc, load16(x, T, j, m));
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    prefetch64<T>(x, i, ahead);
    step(i, 0xFFFF, a0);
    step(i + 16, 0xFFFF, a1);
    step(i + 32, 0xFFFF, a2);
    step(i + 48, 0xFFFF, a3);
  }
  tail_steps(i, n, a0, a1, a2, a3, step);
  return combine(a0, a1, a2, a3);
}

template <DType XT, DType RT>
float add_sum_squares_t(const void* x, const void* r, void* s, int64_t n, int64_t ahead) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  // The sum rounded to RT as stored, then squared from the stored value.
  auto step = [&](int64_t j, __mmask16 m, __m512& acc) __attribute__((always_inline)) {
    __m512 v = _mm512_add_ps(load16(r, RT, j, m), load16(x, XT, j, m));
    if constexpr (RT == DType::bf16) {
      const __m256i h = to_bf16_hw(v);
      _mm256_mask_storeu_epi16(static_cast<uint16_t*>(s) + j, m, h);
      v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    } else {
      _mm512_mask_storeu_ps(static_cast<float*>(s) + j, m, v);
    }
    acc = _mm512_fmadd_ps(v, v, acc);  // masked-off lanes are 0 + 0
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    prefetch64<XT>(x, i, ahead);
    prefetch64<RT>(r, i, ahead);
    step(i, 0xFFFF, a0);
    step(i + 16, 0xFFFF, a1);
    step(i + 32, 0xFFFF, a2);
    step(i + 48, 0xFFFF, a3);
  }
  tail_steps(i, n, a0, a1, a2, a3, step);
  return combine(a0, a1, a2, a3);
}

// The lines of the next rows (kernels/norm.h) that hold the next 32 elements, prefetched once
// per 32 elements of this row, without a branch: each row is a running pointer (two lines per
// step, the second already the next step's line for bf16 rows), and an absent row points at a
// line of its own that stays in L1, stepping by 0. The first version read the NextRows fields
// through the reference and tested them every step: the compiler reloaded them after every
// store to y (they might alias), and those scalar checks drew a third of the pass's samples.
alignas(64) const char kIdleLines[128] = {};  // what an absent next row prefetches (read only)

struct NextRowPrefetch {
  const char* p0;
  const char* p1;
  int64_t step0, step1;
  explicit NextRowPrefetch(const NextRows& n) {
    p0 = n.row[0] ? static_cast<const char*>(n.row[0]) : kIdleLines;
    p1 = n.row[1] ? static_cast<const char*>(n.row[1]) : kIdleLines;
    step0 = n.row[0] ? 32 * n.element_bytes[0] : 0;
    step1 = n.row[1] ? 32 * n.element_bytes[1] : 0;
  }
  [[gnu::always_inline]] void operator()() {
    _mm_prefetch(p0, _MM_HINT_T0);
    _mm_prefetch(p0 + 64, _MM_HINT_T0);
    _mm_prefetch(p1, _MM_HINT_T0);
    _mm_prefetch(p1 + 64, _MM_HINT_T0);
    p0 += step0;
    p1 += step1;
  }
};

// Writes f(j, m) for every 16 elements of y: 32 at a time with whole-line (optionally streamed)
// stores, after a head that brings y to a line boundary when streaming; prefetches the next
// rows as it goes. Streamed stores are not fenced here: an sfence per row waits for the row's
// lines to drain before the next row's loads may run ahead; the op fences once per thread
// after its last row (kernels/norm.h).
template <DType YT, class Value>
[[gnu::always_inline]] inline void write_row(void* y, int64_t n, bool stream, Value&& f, const NextRows& next_rows) {
  NextRowPrefetch prefetch_next(next_rows);
  int64_t head = stream ? elements_to_line(y, YT) : 0;
  if (head < 0) head = 0, stream = false;
  if (head > n) head = n;
  int64_t i = 0;
  for (; i < head; i += 16) store16_hw(y, YT, i, tail_mask(head - i), f(i, tail_mask(head - i)));
  i = head;
  if (stream) {
    for (; i + 32 <= n; i += 32) {
      prefetch_next();
      store32(y, YT, i, f(i, 0xFFFF), f(i + 16, 0xFFFF), true);
    }
  } else {
    for (; i + 32 <= n; i += 32) {
      prefetch_next();
      store32(y, YT, i, f(i, 0xFFFF), f(i + 16, 0xFFFF), false);
    }
  }
  for (; i < n; i += 16) store16_hw(y, YT, i, tail_mask(n - i), f(i, tail_mask(n - i)));
}

template <DType XT, DType YT>
void rms_apply_t(const void* x, float inv, const float* w, void* y, int64_t n, bool stream, const NextRows& next) {
  const __m512 iv = _mm512_set1_ps(inv);
  auto f = [&](int64_t j, __mmask16 m) __attribute__((always_inline)) {
    return _mm512_mul_ps(_mm512_mul_ps(load16(x, XT, j, m), iv), _mm512_maskz_loadu_ps(m, w + j));
  };
  write_row<YT>(y, n, stream, f, next);
}

// Writes g(j, m) (32 bf16 results in element order, m: the valid ones) for every 32 elements of
// a bf16 y, as write_row does for 16 at a time.
template <class Value32>
[[gnu::always_inline]] inline void write_row_bf16x32(uint16_t* y, int64_t n, bool stream, Value32&& g,
                                                     const NextRows& next_rows) {
  NextRowPrefetch prefetch_next(next_rows);
  int64_t head = stream ? elements_to_line(y, DType::bf16) : 0;
  if (head < 0) head = 0, stream = false;
  head = std::min(head, n);
  if (head > 0) _mm512_mask_storeu_epi16(y, mask32(head), g(0, mask32(head)));
  int64_t i = head;
  if (stream) {
    for (; i + 32 <= n; i += 32) {
      prefetch_next();
      _mm512_stream_si512(reinterpret_cast<__m512i*>(y + i), g(i, ~__mmask32(0)));
    }
  } else {
    for (; i + 32 <= n; i += 32) {
      prefetch_next();
      _mm512_storeu_si512(y + i, g(i, ~__mmask32(0)));
    }
  }
  if (i < n) _mm512_mask_storeu_epi16(y + i, mask32(n - i), g(i, mask32(n - i)));
}

// rms_apply for bf16 x, weight and y, on even and odd elements: 32 elements of x and of w each
// widen with one load, one shift and one and (no shuffle, no f32 copy of the weight), and one
// vpermw puts the 32 results back in order. The weight then takes 14 KiB of L1 instead of 28:
// with the row (14 KiB) and the next row being prefetched (14 KiB) it fits in L1's 48.
void rms_apply_bf16w(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                     const NextRows& next_rows) {
  const __m512 iv = _mm512_set1_ps(inv);
  auto g = [&](int64_t j, __mmask32 m) __attribute__((always_inline)) {
    const __m512i zx = _mm512_maskz_loadu_epi16(m, x + j), zw = _mm512_maskz_loadu_epi16(m, w + j);
    return bf16_even_odd_to_order(_mm512_mul_ps(_mm512_mul_ps(even_of(zx), iv), even_of(zw)),
                                  _mm512_mul_ps(_mm512_mul_ps(odd_of(zx), iv), odd_of(zw)));
  };
  write_row_bf16x32(y, n, stream, g, next_rows);
}

// Calls f(e0, o0, e1, o1, lanes) for the block of 64 bf16 at element s of p, as bf16_blocks64
// does for each block (the masked tail when fewer than 64 are left).
template <class F>
[[gnu::always_inline]] inline void bf16_block64_at(const uint16_t* p, int64_t s, int64_t n, F&& f) {
  if (s + 64 <= n) {
    const __m512i z0 = _mm512_loadu_si512(p + s), z1 = _mm512_loadu_si512(p + s + 32);
    f(even_of(z0), odd_of(z0), even_of(z1), odd_of(z1), Lanes4{0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF});
    return;
  }
  const int64_t r0 = std::min<int64_t>(n - s, 32), r1 = std::max<int64_t>(n - s - 32, 0);
  const __m512i z0 = _mm512_maskz_loadu_epi16(mask32(r0), p + s);
  const __m512i z1 = _mm512_maskz_loadu_epi16(mask32(r1), p + s + 32);
  f(even_of(z0), odd_of(z0), even_of(z1), odd_of(z1),
    Lanes4{tail_mask((r0 + 1) / 2), tail_mask(r0 / 2), tail_mask((r1 + 1) / 2), tail_mask(r1 / 2)});
}

// write_row_bf16x32 for row r, with the statistics of row r + 1 (xn) taken in the same loop:
// f(e0, o0, e1, o1, lanes) for each of xn's blocks of 64 in bf16_blocks64's order (from element
// 0, whatever the output's alignment head; then the masked tail), one block per 64 outputs. The
// memory then reads row r + 1 while row r is written, instead of idling through a statistics
// pass that runs from L1; xn is prefetched as the statistics passes do (tp's pass distances).
template <class Value32, class Block>
[[gnu::always_inline]] inline void write_row_bf16x32_next(uint16_t* y, int64_t n, bool stream, Value32&& g,
                                                          const uint16_t* xn, int64_t ahead_bytes,
                                                          const TuningParams& tp, Block&& f) {
  int64_t head = stream ? elements_to_line(y, DType::bf16) : 0;
  if (head < 0) head = 0, stream = false;
  head = std::min(head, n);
  if (head > 0) _mm512_mask_storeu_epi16(y, mask32(head), g(0, mask32(head)));
  int64_t i = head, s = 0;  // s <= i - head: a whole block of xn exists at s in both loops
  // Look-ahead stops where the caller's rows do. The L2 look-ahead is for the streaming case
  // (outputs past the streaming threshold), where the L1 miss buffers bind; a 16-row call (cold
  // rows, y kept in cache) ran 3-4% slower with it.
  const int64_t l1_ahead = tp.pass_prefetch_bytes, l2_ahead = tp.pass_l2_prefetch_bytes;
  const int64_t l2_until = stream ? 2 * n + ahead_bytes - l2_ahead : INT64_MIN;
  const int64_t l1_until = 2 * n + ahead_bytes - l1_ahead;
  auto block = [&](int64_t at) __attribute__((always_inline)) {
    if (2 * at < l2_until) prefetch64<DType::bf16, _MM_HINT_T1>(xn, at, l2_ahead);
    if (2 * at < l1_until) prefetch64<DType::bf16>(xn, at, l1_ahead);
    const __m512i z0 = _mm512_loadu_si512(xn + at), z1 = _mm512_loadu_si512(xn + at + 32);
    f(even_of(z0), odd_of(z0), even_of(z1), odd_of(z1), Lanes4{0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF});
  };
  if (stream) {
    // The output's whole blocks from the last to the first, while the statistics go forward:
    // the lines of this row that the previous row's loop summed last are read back first, so
    // half the row comes back within half a row's traffic instead of all of it at a whole
    // row's, past what L1 holds (probe: -3 to -5% on 4096 x 7168, one thread).
    const int64_t blocks = (n - head) / 64;
    for (int64_t k = blocks - 1; k >= 0; --k, s += 64) {
      block(s);
      const int64_t j = head + 64 * k;
      _mm512_stream_si512(reinterpret_cast<__m512i*>(y + j + 32), g(j + 32, ~__mmask32(0)));
      _mm512_stream_si512(reinterpret_cast<__m512i*>(y + j), g(j, ~__mmask32(0)));
    }
    i = head + 64 * blocks;
  } else {
    for (; i + 64 <= n; i += 64, s += 64) {
      block(s);
      _mm512_storeu_si512(y + i, g(i, ~__mmask32(0)));
      _mm512_storeu_si512(y + i + 32, g(i + 32, ~__mmask32(0)));
    }
  }
  for (; i < n; i += 32) _mm512_mask_storeu_epi16(y + i, mask32(n - i), g(i, mask32(n - i)));
  for (; s < n; s += 64) bf16_block64_at(xn, s, n, f);
}

// rms_apply_bf16w for row r, returning row r + 1's sum of squares (sum_squares_bf16's bits).
float rms_apply_bf16w_next(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                           const uint16_t* xn, int64_t ahead_bytes, const TuningParams& tp) {
  const __m512 iv = _mm512_set1_ps(inv);
  auto g = [&](int64_t j, __mmask32 m) __attribute__((always_inline)) {
    const __m512i zx = _mm512_maskz_loadu_epi16(m, x + j), zw = _mm512_maskz_loadu_epi16(m, w + j);
    return bf16_even_odd_to_order(_mm512_mul_ps(_mm512_mul_ps(even_of(zx), iv), even_of(zw)),
                                  _mm512_mul_ps(_mm512_mul_ps(odd_of(zx), iv), odd_of(zw)));
  };
  Reduce4<AddSquare> acc;
  write_row_bf16x32_next(y, n, stream, g, xn, ahead_bytes, tp,
                         [&](__m512 e0, __m512 o0, __m512 e1, __m512 o1, Lanes4 m)
                             __attribute__((always_inline)) { acc(e0, o0, e1, o1, m); });
  return acc.result();
}

// g(j, m) of write_row_bf16x32 for layernorm with bf16 x, weight and bias: the 32 outputs at j
// (mask m) as bf16 words in element order, fma(fma(x - shift, inv, -dm_inv), w, b).
[[gnu::always_inline]] inline auto layernorm_out_bf16w(const uint16_t* x, float shift, float dm_inv, float inv,
                                                       const uint16_t* w, const uint16_t* b) {
  const __m512 sv = _mm512_set1_ps(shift), dv = _mm512_set1_ps(dm_inv), iv = _mm512_set1_ps(inv);
  return [=](int64_t j, __mmask32 m) __attribute__((always_inline)) {
    const __m512i zx = _mm512_maskz_loadu_epi16(m, x + j), zw = _mm512_maskz_loadu_epi16(m, w + j);
    const __m512i zb = _mm512_maskz_loadu_epi16(m, b + j);
    auto one = [&](__m512 xv, __m512 wv, __m512 bv) __attribute__((always_inline)) {
      return _mm512_fmadd_ps(_mm512_fmsub_ps(_mm512_sub_ps(xv, sv), iv, dv), wv, bv);
    };
    return bf16_even_odd_to_order(one(even_of(zx), even_of(zw), even_of(zb)), one(odd_of(zx), odd_of(zw), odd_of(zb)));
  };
}

// layernorm_apply for bf16 x, weight, bias and y, the same way (the weight and bias together
// take 28 KiB of L1, and need neither an f32 copy nor a packed one).
void layernorm_apply_bf16w(const uint16_t* x, float shift, float dm_inv, float inv, const uint16_t* w,
                           const uint16_t* b, uint16_t* y, int64_t n, bool stream, const NextRows& next_rows) {
  const auto g = layernorm_out_bf16w(x, shift, dm_inv, inv, w, b);
  write_row_bf16x32(y, n, stream, g, next_rows);
}

// layernorm_apply_bf16w for row r, with row r + 1's shifted sums around shift_n (shifted_sums_bf16's
// bits) taken in the same loop.
void layernorm_apply_bf16w_next(const uint16_t* x, float shift, float dm_inv, float inv, const uint16_t* w,
                                const uint16_t* b, uint16_t* y, int64_t n, bool stream, const uint16_t* xn,
                                float shift_n, float* sum_d, float* sum_d2, int64_t ahead_bytes,
                                const TuningParams& tp) {
  const auto g = layernorm_out_bf16w(x, shift, dm_inv, inv, w, b);
  ShiftedSums4 acc(shift_n);
  write_row_bf16x32_next(y, n, stream, g, xn, ahead_bytes, tp,
                         [&](__m512 e0, __m512 o0, __m512 e1, __m512 o1, Lanes4 m)
                             __attribute__((always_inline)) { acc(e0, o0, e1, o1, m); });
  acc.result(sum_d, sum_d2);
}

template <DType XT>
void rms_apply_amax_t(const void* x, float inv, const float* w, uint16_t* y, int64_t n, int64_t group,
                      uint16_t* amax32, const NextRows& next_rows) {
  NextRowPrefetch prefetch_next(next_rows);
  const __m512 iv = _mm512_set1_ps(inv);
  const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
  auto f = [&](int64_t j) __attribute__((always_inline)) {
    return _mm512_mul_ps(_mm512_mul_ps(load16(x, XT, j, 0xFFFF), iv), _mm512_loadu_ps(w + j));
  };
  for (int64_t g0 = 0; g0 < n; g0 += group) {
    __m512i m = _mm512_setzero_si512();
    for (int64_t i = g0; i < g0 + group; i += 32) {
      prefetch_next();
      const __m512i v = to_bf16x32(f(i), f(i + 16));  // as store32 rounds
      _mm512_storeu_si512(y + i, v);
      m = _mm512_max_epu16(m, _mm512_and_si512(v, magnitude));
    }
    _mm512_storeu_si512(amax32 + g0 / group * 32, m);
  }
}

// ((x - shift) - dm) * inv as one fused multiply-subtract of (x - shift) by inv and dm * inv
// (kernels/norm.h): with the bias and weight, three arithmetic ops per 16 elements instead of
// four, and the bias test is out of the loop (a template parameter).
template <DType XT, DType YT, bool kBias>
void layernorm_apply_t(const void* x, float shift, float dm_inv, float inv, const float* w, const float* b, void* y,
                       int64_t n, bool stream, const NextRows& next) {
  const __m512 sv = _mm512_set1_ps(shift), dv = _mm512_set1_ps(dm_inv), iv = _mm512_set1_ps(inv);
  auto f = [&](int64_t j, __mmask16 m) __attribute__((always_inline)) {
    const __m512 v = _mm512_fmsub_ps(_mm512_sub_ps(load16(x, XT, j, m), sv), iv, dv);
    const __m512 wv = _mm512_maskz_loadu_ps(m, w + j);
    if constexpr (kBias) return _mm512_fmadd_ps(v, wv, _mm512_maskz_loadu_ps(m, b + j));
    else return _mm512_mul_ps(v, wv);
  };
  write_row<YT>(y, n, stream, f, next);
}

template <DType XT, DType YT>
void layernorm_apply_t(const void* x, float shift, float dm_inv, float inv, const float* w, const float* b, void* y,
                       int64_t n, bool stream, const NextRows& next) {
  if (b) return layernorm_apply_t<XT, YT, true>(x, shift, dm_inv, inv, w, b, y, n, stream, next);
  layernorm_apply_t<XT, YT, false>(x, shift, dm_inv, inv, w, b, y, n, stream, next);
}

// The same with bf16 weight and bias packed into one 32-bit word per element (w in the high
// half, b in the low half): both widen exactly with one op each, and the pair takes 4 bytes per
// element instead of the 8 of two f32 vectors. What that buys: a 7168-wide row's f32 weight and
// bias (56 KiB) do not fit in L1 beside the row, so every row read them back from L2.
template <DType XT, DType YT>
void layernorm_apply_packed_t(const void* x, float shift, float dm_inv, float inv, const uint32_t* wb, void* y,
                              int64_t n, bool stream, const NextRows& next) {
  const __m512 sv = _mm512_set1_ps(shift), dv = _mm512_set1_ps(dm_inv), iv = _mm512_set1_ps(inv);
  auto f = [&](int64_t j, __mmask16 m) __attribute__((always_inline)) {
    const __m512 v = _mm512_fmsub_ps(_mm512_sub_ps(load16(x, XT, j, m), sv), iv, dv);
    const __m512i p = _mm512_maskz_loadu_epi32(m, wb + j);
    return _mm512_fmadd_ps(v, odd_of(p), even_of(p));
  };
  write_row<YT>(y, n, stream, f, next);
}

template <DType T>
void shifted_sums_t(const void* x, float shift, int64_t n, float* sum_d, float* sum_d2, int64_t ahead) {
  const __m512 sv = _mm512_set1_ps(shift);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  auto step = [&](int64_t j, __mmask16 m, __m512& a, __m512& b) __attribute__((always_inline)) {
    __m512 d = _mm512_maskz_sub_ps(m, load16(x, T, j, m), sv);
    a = _mm512_add_ps(a, d);
    b = _mm512_fmadd_ps(d, d, b);
  };
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    prefetch64<T>(x, i, ahead);  // the statistics pass reads the row from memory
    step(i, 0xFFFF, a0, b0);
    step(i + 16, 0xFFFF, a1, b1);
    step(i + 32, 0xFFFF, a2, b2);
    step(i + 48, 0xFFFF, a3, b3);
  }
  if (i < n) step(i, tail_mask(n - i), a0, b0);
  if (i + 16 < n) step(i + 16, tail_mask(n - i - 16), a1, b1);
  if (i + 32 < n) step(i + 32, tail_mask(n - i - 32), a2, b2);
  if (i + 48 < n) step(i + 48, tail_mask(n - i - 48), a3, b3);
  *sum_d = combine(a0, a1, a2, a3);
  *sum_d2 = combine(b0, b1, b2, b3);
}

}  // namespace

float sum_squares_avx512(const void* x, DType t, int64_t n, const TuningParams& tp) {
  const int64_t ahead = tp.pass_prefetch_bytes;
  return t == DType::bf16 ? sum_squares_bf16(x, n, ahead) : reduce_t<DType::f32>(x, n, ahead, AddSquare{});
}

float add_sum_squares_avx512(const void* x, DType xt, const void* r, DType rt, void* s, int64_t n,
                             const TuningParams& tp) {
  const int64_t ahead = tp.pass_prefetch_bytes;
  if (rt == DType::bf16) {
    if (xt == DType::bf16)
      return add_sum_squares_bf16(static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(r),
                                  static_cast<uint16_t*>(s), n, ahead);
    // f32 x into a bf16 residual (rare): two passes keep the bf16 order of the sum.
    if (s != r) {
      for (int64_t i = 0; i < n; i += 16)
        store16(s, rt, i, tail_mask(n - i), load16(r, rt, i, tail_mask(n - i)));
    }
    add_into_avx512(x, xt, s, rt, n);
    return sum_squares_bf16(s, n, ahead);
  }
  return xt == DType::bf16 ? add_sum_squares_t<DType::bf16, DType::f32>(x, r, s, n, ahead)
                           : add_sum_squares_t<DType::f32, DType::f32>(x, r, s, n, ahead);
}

void rms_apply_avx512(const void* x, DType xt, float inv, const float* w, void* y, DType yt, int64_t n,
                      bool stream, const NextRows& next) {
  if (xt == DType::bf16) {
    if (yt == DType::bf16) return rms_apply_t<DType::bf16, DType::bf16>(x, inv, w, y, n, stream, next);
    return rms_apply_t<DType::bf16, DType::f32>(x, inv, w, y, n, stream, next);
  }
  if (yt == DType::bf16) return rms_apply_t<DType::f32, DType::bf16>(x, inv, w, y, n, stream, next);
  return rms_apply_t<DType::f32, DType::f32>(x, inv, w, y, n, stream, next);
}

void rms_apply_bf16w_avx512(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                            const NextRows& next) {
  rms_apply_bf16w(x, inv, w, y, n, stream, next);
}

float rms_apply_bf16w_next_avx512(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                                  const uint16_t* x_next, int64_t ahead_bytes, const TuningParams& tp) {
  return rms_apply_bf16w_next(x, inv, w, y, n, stream, x_next, ahead_bytes, tp);
}

void layernorm_apply_bf16w_avx512(const uint16_t* x, float shift, float dm_inv, float inv, const uint16_t* w,
                                  const uint16_t* b, uint16_t* y, int64_t n, bool stream, const NextRows& next) {
  layernorm_apply_bf16w(x, shift, dm_inv, inv, w, b, y, n, stream, next);
}

void layernorm_apply_bf16w_next_avx512(const uint16_t* x, float shift, float dm_inv, float inv, const uint16_t* w,
                                       const uint16_t* b, uint16_t* y, int64_t n, bool stream, const uint16_t* x_next,
                                       float shift_next, float* sum_d, float* sum_d2, int64_t ahead_bytes,
                                       const TuningParams& tp) {
  layernorm_apply_bf16w_next(x, shift, dm_inv, inv, w, b, y, n, stream, x_next, shift_next, sum_d, sum_d2,
                             ahead_bytes, tp);
}

void rms_apply_bf16_amax_avx512(const void* x, DType xt, float inv, const float* w, uint16_t* y, int64_t n,
                                int64_t group, uint16_t* amax32, const NextRows& next) {
  if (xt == DType::bf16) return rms_apply_amax_t<DType::bf16>(x, inv, w, y, n, group, amax32, next);
  rms_apply_amax_t<DType::f32>(x, inv, w, y, n, group, amax32, next);
}

float sum_avx512(const void* x, DType t, int64_t n, const TuningParams& tp) {
  const int64_t ahead = tp.pass_prefetch_bytes;
  return t == DType::bf16 ? sum_bf16(x, n, ahead) : reduce_t<DType::f32>(x, n, ahead, AddValue{});
}

void shifted_sums_avx512(const void* x, DType t, float shift, int64_t n, float* sum_d, float* sum_d2,
                         const TuningParams& tp) {
  const int64_t ahead = tp.pass_prefetch_bytes;
  if (t == DType::bf16) return shifted_sums_bf16(x, shift, n, sum_d, sum_d2, ahead);
  return shifted_sums_t<DType::f32>(x, shift, n, sum_d, sum_d2, ahead);
}

void layernorm_apply_f32w_avx512(const void* x, DType xt, float shift, float dm_inv, float inv, const float* w,
                                 const float* b, void* y, DType yt, int64_t n, bool stream, const NextRows& next) {
  if (xt == DType::bf16) {
    if (yt == DType::bf16)
      return layernorm_apply_t<DType::bf16, DType::bf16>(x, shift, dm_inv, inv, w, b, y, n, stream, next);
    return layernorm_apply_t<DType::bf16, DType::f32>(x, shift, dm_inv, inv, w, b, y, n, stream, next);
  }
  if (yt == DType::bf16)
    return layernorm_apply_t<DType::f32, DType::bf16>(x, shift, dm_inv, inv, w, b, y, n, stream, next);
  return layernorm_apply_t<DType::f32, DType::f32>(x, shift, dm_inv, inv, w, b, y, n, stream, next);
}

void layernorm_apply_packed_avx512(const void* x, DType xt, float shift, float dm_inv, float inv, const uint32_t* wb,
                                   void* y, DType yt, int64_t n, bool stream, const NextRows& next) {
  if (xt == DType::bf16) {
    if (yt == DType::bf16)
      return layernorm_apply_packed_t<DType::bf16, DType::bf16>(x, shift, dm_inv, inv, wb, y, n, stream, next);
    return layernorm_apply_packed_t<DType::bf16, DType::f32>(x, shift, dm_inv, inv, wb, y, n, stream, next);
  }
  if (yt == DType::bf16)
    return layernorm_apply_packed_t<DType::f32, DType::bf16>(x, shift, dm_inv, inv, wb, y, n, stream, next);
  return layernorm_apply_packed_t<DType::f32, DType::f32>(x, shift, dm_inv, inv, wb, y, n, stream, next);
}

void pack_bf16_pairs_avx512(const uint16_t* hi, const uint16_t* lo, uint32_t* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512i h = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, hi + i));
    const __m512i l = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, lo + i));
    _mm512_mask_storeu_epi32(out + i, m, _mm512_or_si512(_mm512_slli_epi32(h, 16), l));
  }
}

void add_into_avx512(const void* x, DType xt, void* r, DType rt, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = tail_mask(n - i);
    store16_hw(r, rt, i, m, _mm512_add_ps(load16(r, rt, i, m), load16(x, xt, i, m)));
  }
}

}  // namespace sol::kernels
