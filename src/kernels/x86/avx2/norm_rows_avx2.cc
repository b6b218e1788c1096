// The bf16 row pipelines of rmsnorm and layernorm at AVX2 (kernels/norm.h): row r's output and
// row r + 1's statistics in one loop (the next row from memory, this one from L1), x, w and b
// split into even and odd values by a shift and an and, each chunk's results rounded in one
// integer pass (pair_avx2.h: the operands are bf16 and the row's factors finite or NaNs derived
// from bf16 values, so the rounding is exact), streamed stores where y's row starts a line. The
// statistics are the portable kernels' (same partial sums, same order): bit for bit.
#include <immintrin.h>

#include <climits>
#include <cmath>

#include "kernels/norm.h"
#include "kernels/x86/avx2/norm_order_avx2.h"
#include "kernels/x86/avx2/pair_avx2.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {

namespace {

// rmsnorm's output: round((x * inv) * w), scale_by_weight's two roundings.
struct RmsOut {
  const uint16_t* x;
  const uint16_t* w;
  float inv;
  __m256 iv;
  RmsOut(const uint16_t* x_, const uint16_t* w_, float inv_) : x(x_), w(w_), inv(inv_), iv(_mm256_set1_ps(inv_)) {}
  // The 16 codes of elements j..j+15.
  [[gnu::always_inline]] __m256i chunk(int64_t j) const {
    const Pair8 xv = load_bf16x16(x + j), wv = load_bf16x16(w + j);
    return bf16_pairs(_mm256_mul_ps(_mm256_mul_ps(xv.even, iv), wv.even),
                      _mm256_mul_ps(_mm256_mul_ps(xv.odd, iv), wv.odd));
  }
  uint16_t one(int64_t j) const {
    const float scaled = bf16_to_f32(x[j]) * inv;
    return f32_to_bf16(scaled * bf16_to_f32(w[j]));
  }
};

// layernorm's output with a bias: round(fma(fma(x - shift, inv, -dm_inv), w, b)),
// layernorm_apply's roundings.
struct LayerOut {
  const uint16_t* x;
  const uint16_t* w;
  const uint16_t* b;
  float shift, dm_inv, inv;
  __m256 sv, dv, iv;
  LayerOut(const uint16_t* x_, const uint16_t* w_, const uint16_t* b_, float shift_, float dm_inv_, float inv_)
      : x(x_), w(w_), b(b_), shift(shift_), dm_inv(dm_inv_), inv(inv_),
        sv(_mm256_set1_ps(shift_)), dv(_mm256_set1_ps(dm_inv_)), iv(_mm256_set1_ps(inv_)) {}
  [[gnu::always_inline]] __m256 value(__m256 xv, __m256 wv, __m256 bv) const {
    return _mm256_fmadd_ps(_mm256_fmsub_ps(_mm256_sub_ps(xv, sv), iv, dv), wv, bv);
  }
  [[gnu::always_inline]] __m256i chunk(int64_t j) const {
    const Pair8 xv = load_bf16x16(x + j), wv = load_bf16x16(w + j), bv = load_bf16x16(b + j);
    return bf16_pairs(value(xv.even, wv.even, bv.even), value(xv.odd, wv.odd, bv.odd));
  }
  uint16_t one(int64_t j) const {
    const float v = std::fma(bf16_to_f32(x[j]) - shift, inv, -dm_inv);
    return f32_to_bf16(std::fma(v, bf16_to_f32(w[j]), bf16_to_f32(b[j])));
  }
};

// The next row's sums of d and d^2 around its shift, in shifted_sums' partial sums.
struct ShiftedSums {
  __m256 sd[8], sd2[8], shift;
  float part[64], part2[64];
  float shift_f;
  explicit ShiftedSums(float s) : shift(_mm256_set1_ps(s)), shift_f(s) {
    for (int a = 0; a < 8; ++a) sd[a] = sd2[a] = _mm256_setzero_ps();
  }
  [[gnu::always_inline]] void block(const __m256 (&v)[8]) {
#pragma GCC unroll 8
    for (int a = 0; a < 8; ++a) {
      const __m256 d = _mm256_sub_ps(v[a], shift);
      sd[a] = _mm256_add_ps(sd[a], d);
      sd2[a] = _mm256_fmadd_ps(d, d, sd2[a]);
    }
  }
  void spill() {
    for (int a = 0; a < 8; ++a) _mm256_storeu_ps(part + 8 * a, sd[a]), _mm256_storeu_ps(part2 + 8 * a, sd2[a]);
  }
  void one(int64_t j, float v) {
    const float d = v - shift_f;
    const int64_t k = partial(j, DType::bf16);
    part[k] += d;
    part2[k] = std::fma(d, d, part2[k]);
  }
};

// Streaming needs whole, aligned lines: the blocks of 64 bf16 start at the row's start.
bool streams(bool stream, const uint16_t* y) { return stream && reinterpret_cast<uintptr_t>(y) % 64 == 0; }

template <bool Stream, class Out>
[[gnu::always_inline]] inline void out_block64(const Out& out, uint16_t* y, int64_t i) {
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const __m256i r = out.chunk(i + 16 * q);
    auto* p = reinterpret_cast<__m256i*>(y + i + 16 * q);
    if constexpr (Stream) _mm256_stream_si256(p, r);
    else _mm256_storeu_si256(p, r);
  }
}

// One row's output; the next rows' same elements (read next by the caller) requested as it goes.
template <bool Stream, class Out>
void write_row(const Out& out, uint16_t* y, int64_t n, const NextRows& next) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 2; ++k)
      if (next.row[k])
        for (int64_t b = 0; b < 64 * next.element_bytes[k]; b += 64)
          _mm_prefetch(static_cast<const char*>(next.row[k]) + i * next.element_bytes[k] + b, _MM_HINT_T0);
    out_block64<Stream>(out, y, i);
  }
  for (; i < n; ++i) y[i] = out.one(i);
}

// Row r's output and row r + 1's statistics (xn) in one loop: the next row comes from memory
// while this one, read a row ago, is in L1. Its lines are requested tp.pass_prefetch_bytes ahead
// into L1 and, when streaming, pass_l2_prefetch_bytes ahead into L2 (the AVX-512 pipeline's
// rule), up to ahead_bytes past its end.
template <bool Stream, class Out, class Sums>
void write_row_next(const Out& out, uint16_t* y, int64_t n, const uint16_t* xn, int64_t ahead_bytes,
                    const TuningParams& tp, Sums& sums) {
  const char* xb = reinterpret_cast<const char*>(xn);
  const int64_t l1_ahead = tp.pass_prefetch_bytes, l2_ahead = tp.pass_l2_prefetch_bytes;
  const int64_t l1_until = 2 * n + ahead_bytes - l1_ahead;
  const int64_t l2_until = Stream ? 2 * n + ahead_bytes - l2_ahead : INT64_MIN;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const int64_t at = 2 * i;  // the block's 128 bytes: two lines
    if (at < l2_until) {
      asm volatile("prefetcht1 (%0)" : : "r"(xb + at + l2_ahead));
      asm volatile("prefetcht1 64(%0)" : : "r"(xb + at + l2_ahead));
    }
    if (at < l1_until) {
      _mm_prefetch(xb + at + l1_ahead, _MM_HINT_T0);
      _mm_prefetch(xb + at + l1_ahead + 64, _MM_HINT_T0);
    }
    __m256 v[8];
    load_block64<DType::bf16>(xn, i, v);
    sums.block(v);
    out_block64<Stream>(out, y, i);
  }
  sums.spill();
  for (int64_t j = i; j < n; ++j) sums.one(j, bf16_to_f32(xn[j]));
  for (; i < n; ++i) y[i] = out.one(i);
}

template <class Out>
void write_row(const Out& out, uint16_t* y, int64_t n, bool stream, const NextRows& next) {
  if (streams(stream, y)) write_row<true>(out, y, n, next);
  else write_row<false>(out, y, n, next);
}

template <class Out, class Sums>
void write_row_next(const Out& out, uint16_t* y, int64_t n, bool stream, const uint16_t* xn, int64_t ahead_bytes,
                    const TuningParams& tp, Sums& sums) {
  if (streams(stream, y)) write_row_next<true>(out, y, n, xn, ahead_bytes, tp, sums);
  else write_row_next<false>(out, y, n, xn, ahead_bytes, tp, sums);
}

}  // namespace

void rms_apply_bf16w_avx2(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                          const NextRows& next) {
  write_row(RmsOut(x, w, inv), y, n, stream, next);
}

float rms_apply_bf16w_next_avx2(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                                const uint16_t* x_next, int64_t ahead_bytes, const TuningParams& tp) {
  SquareSums sums;
  write_row_next(RmsOut(x, w, inv), y, n, stream, x_next, ahead_bytes, tp, sums);
  return combine(sums.part);
}

void layernorm_apply_bf16w_avx2(const uint16_t* x, float shift, float dm_inv, float inv, const uint16_t* w,
                                const uint16_t* b, uint16_t* y, int64_t n, bool stream, const NextRows& next) {
  write_row(LayerOut(x, w, b, shift, dm_inv, inv), y, n, stream, next);
}

void layernorm_apply_bf16w_next_avx2(const uint16_t* x, float shift, float dm_inv, float inv, const uint16_t* w,
                                     const uint16_t* b, uint16_t* y, int64_t n, bool stream, const uint16_t* x_next,
                                     float shift_next, float* sum_d, float* sum_d2, int64_t ahead_bytes,
                                     const TuningParams& tp) {
  ShiftedSums sums(shift_next);
  write_row_next(LayerOut(x, w, b, shift, dm_inv, inv), y, n, stream, x_next, ahead_bytes, tp, sums);
  *sum_d = combine(sums.part);
  *sum_d2 = combine(sums.part2);
}

}  // namespace sol::kernels
