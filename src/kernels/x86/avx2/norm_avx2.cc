// AVX2 row kernels of the norms: the portable members of the norm table (sums, scale by
// weight, layernorm's apply, the residual add), bit for bit the scalar ones. The sums keep the
// 64 partial sums of kernels/norm.h as eight 8-lane accumulators, accumulator A holding
// partial sums 8A..8A+7, so every partial sum sees its elements in the scalar order; the rest
// of a row after its last whole block of 64 goes through the same partial sums one element at
// a time, then they combine in the scalar order. Elementwise results round as the scalar ones
// (f32x8_to_bf16 is f32_to_bf16). Of the row pipeline, rmsnorm's bf16 members are here too (the
// output of row r and the sum of squares of row r + 1 in one loop); the other ops take the
// portable route through these kernels.
//
// Scalar code here is compiled with FMA enabled and GCC contracts a * b + c by default: every
// expression below that the scalar path rounds twice is written with no add next to a product.

#include <immintrin.h>

#include <cmath>

#include "kernels/norm.h"
#include "kernels/x86/avx2/pair_avx2.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {

namespace {

float get(const void* p, DType t, int64_t i) {
  return t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(p)[i]) : static_cast<const float*>(p)[i];
}

void put(void* p, DType t, int64_t i, float v) {
  if (t == DType::bf16) static_cast<uint16_t*>(p)[i] = f32_to_bf16(v);
  else static_cast<float*>(p)[i] = v;
}

// kernels/norm.h's partial sum of element i.
int64_t partial(int64_t i, DType t) {
  const int64_t j = i % 64;
  if (t != DType::bf16) return j;
  return 16 * (2 * (j / 32) + j % 2) + (j % 32) / 2;
}

float combine(const float (&part)[64]) {
  float s = 0;
  for (int k = 0; k < 16; ++k) s += (part[k] + part[16 + k]) + (part[32 + k] + part[48 + k]);
  return s;
}

// The 64 elements of the block at i as eight vectors in partial-sum order. bf16: each 16
// elements at 32h + 16c widen to their even elements (partial sums 16 (2h) + 8c..) and odd
// ones (16 (2h + 1) + 8c..) by one shift and one and.
template <DType T>
[[gnu::always_inline]] inline void load_block64(const void* x, int64_t i, __m256 (&v)[8]) {
  if constexpr (T == DType::f32) {
    const float* p = static_cast<const float*>(x) + i;
#pragma GCC unroll 8
    for (int a = 0; a < 8; ++a) v[a] = _mm256_loadu_ps(p + 8 * a);
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(x) + i;
    const __m256i high = _mm256_set1_epi32(int(0xFFFF0000u));
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {  // q = 2h + c
      const __m256i z = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * q));
      const int h = q / 2, c = q % 2;
      v[4 * h + c] = _mm256_castsi256_ps(_mm256_slli_epi32(z, 16));
      v[4 * h + 2 + c] = _mm256_castsi256_ps(_mm256_and_si256(z, high));
    }
  }
}

// Runs step(v, acc...) over every whole block of 64, stores the accumulators into their partial
// sums, and returns the index of the first element left for the scalar tail.
template <DType T, int kSums, class Step>
int64_t reduce_blocks(const void* x, int64_t n, float (&part)[kSums][64], Step&& step) {
  __m256 acc[kSums][8];
#pragma GCC unroll 2
  for (int s = 0; s < kSums; ++s)
#pragma GCC unroll 8
    for (int a = 0; a < 8; ++a) acc[s][a] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m256 v[8];
    load_block64<T>(x, i, v);
#pragma GCC unroll 8
    for (int a = 0; a < 8; ++a) step(v[a], acc, a);
  }
#pragma GCC unroll 2
  for (int s = 0; s < kSums; ++s)
#pragma GCC unroll 8
    for (int a = 0; a < 8; ++a) _mm256_storeu_ps(part[s] + 8 * a, acc[s][a]);
  return i;
}

template <DType T>
float sum_squares_t(const void* x, int64_t n) {
  float part[1][64];
  int64_t i = reduce_blocks<T, 1>(x, n, part, [](__m256 v, __m256 (&acc)[1][8], int a) {
    acc[0][a] = _mm256_fmadd_ps(v, v, acc[0][a]);
  });
  for (; i < n; ++i) {
    const float v = get(x, T, i);
    float& p = part[0][partial(i, T)];
    p = std::fma(v, v, p);
  }
  return combine(part[0]);
}

template <DType T>
float sum_t(const void* x, int64_t n) {
  float part[1][64];
  int64_t i = reduce_blocks<T, 1>(x, n, part, [](__m256 v, __m256 (&acc)[1][8], int a) {
    acc[0][a] = _mm256_add_ps(acc[0][a], v);
  });
  for (; i < n; ++i) part[0][partial(i, T)] += get(x, T, i);
  return combine(part[0]);
}

template <DType T>
void shifted_sums_t(const void* x, float shift, int64_t n, float* sum_d, float* sum_d2) {
  float part[2][64];
  const __m256 s = _mm256_set1_ps(shift);
  int64_t i = reduce_blocks<T, 2>(x, n, part, [s](__m256 v, __m256 (&acc)[2][8], int a) {
    const __m256 d = _mm256_sub_ps(v, s);
    acc[0][a] = _mm256_add_ps(acc[0][a], d);
    acc[1][a] = _mm256_fmadd_ps(d, d, acc[1][a]);
  });
  for (; i < n; ++i) {
    const float d = get(x, T, i) - shift;
    const int64_t k = partial(i, T);
    part[0][k] += d;
    part[1][k] = std::fma(d, d, part[1][k]);
  }
  *sum_d = combine(part[0]);
  *sum_d2 = combine(part[1]);
}

// ---- rmsnorm's bf16 row pipeline ----

// y = round((x * inv) * w) for the 64 bf16 at x, w, y (scale_by_weight's two roundings), as
// even/odd pairs: the operands are bf16 and inv finite or a bf16-derived NaN, so bf16_pairs is exact.
template <bool Stream>
[[gnu::always_inline]] inline void rms_out_block64(const uint16_t* x, const uint16_t* w, uint16_t* y, __m256 inv) {
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) {
    const Pair8 xv = load_bf16x16(x + 16 * q), wv = load_bf16x16(w + 16 * q);
    const __m256i r = bf16_pairs(_mm256_mul_ps(_mm256_mul_ps(xv.even, inv), wv.even),
                                 _mm256_mul_ps(_mm256_mul_ps(xv.odd, inv), wv.odd));
    auto* p = reinterpret_cast<__m256i*>(y + 16 * q);
    if constexpr (Stream) _mm256_stream_si256(p, r);
    else _mm256_storeu_si256(p, r);
  }
}

void rms_out_tail(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t i, int64_t n) {
  for (; i < n; ++i) {
    const float scaled = bf16_to_f32(x[i]) * inv;
    y[i] = f32_to_bf16(scaled * bf16_to_f32(w[i]));
  }
}

// Streaming needs whole, aligned lines: the blocks of 64 bf16 start at the row's start.
bool streams(bool stream, const uint16_t* y) { return stream && reinterpret_cast<uintptr_t>(y) % 64 == 0; }

template <bool Stream>
void rms_apply_rows(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, const NextRows& next) {
  const __m256 iv = _mm256_set1_ps(inv);
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int k = 0; k < 2; ++k)  // the next rows' same elements, read next by the caller
      if (next.row[k])
        for (int64_t b = 0; b < 64 * next.element_bytes[k]; b += 64)
          _mm_prefetch(static_cast<const char*>(next.row[k]) + i * next.element_bytes[k] + b, _MM_HINT_T0);
    rms_out_block64<Stream>(x + i, w + i, y + i, iv);
  }
  rms_out_tail(x, inv, w, y, i, n);
}

// Row r's output and row r + 1's sum of squares (sum_squares_t's order and bits) in one loop:
// the next row comes from memory while this one, read a row ago, is in L1. Its lines are
// requested tp.pass_prefetch_bytes ahead into L1 and, when streaming, pass_l2_prefetch_bytes
// ahead into L2 (the AVX-512 pipeline's rule), up to ahead_bytes past its end.
template <bool Stream>
float rms_apply_next_rows(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n,
                          const uint16_t* xn, int64_t ahead_bytes, const TuningParams& tp) {
  const __m256 iv = _mm256_set1_ps(inv);
  const char* xb = reinterpret_cast<const char*>(xn);
  const int64_t l1_ahead = tp.pass_prefetch_bytes, l2_ahead = tp.pass_l2_prefetch_bytes;
  const int64_t l1_until = 2 * n + ahead_bytes - l1_ahead;
  const int64_t l2_until = Stream ? 2 * n + ahead_bytes - l2_ahead : INT64_MIN;
  __m256 acc[8];
#pragma GCC unroll 8
  for (int a = 0; a < 8; ++a) acc[a] = _mm256_setzero_ps();
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
#pragma GCC unroll 8
    for (int a = 0; a < 8; ++a) acc[a] = _mm256_fmadd_ps(v[a], v[a], acc[a]);
    rms_out_block64<Stream>(x + i, w + i, y + i, iv);
  }
  float part[64];
#pragma GCC unroll 8
  for (int a = 0; a < 8; ++a) _mm256_storeu_ps(part + 8 * a, acc[a]);
  for (int64_t j = i; j < n; ++j) {
    const float v = bf16_to_f32(xn[j]);
    float& p = part[partial(j, DType::bf16)];
    p = std::fma(v, v, p);
  }
  rms_out_tail(x, inv, w, y, i, n);
  return combine(part);
}

// s = round(r + x) for all-bf16 rows (add_into's bits) and the sum of s^2 as stored (sum_squares'
// order and bits) in one pass: each chunk's sum rounded by bf16_pairs (bf16 operands), stored,
// and its stored words split again for the squares.
float add_sum_squares_bf16(const uint16_t* x, const uint16_t* r, uint16_t* s, int64_t n) {
  __m256 acc[8];
#pragma GCC unroll 8
  for (int a = 0; a < 8; ++a) acc[a] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {  // q = 2h + c, as in load_block64
      const Pair8 xv = load_bf16x16(x + i + 16 * q), rv = load_bf16x16(r + i + 16 * q);
      const __m256i w = bf16_pairs(_mm256_add_ps(rv.even, xv.even), _mm256_add_ps(rv.odd, xv.odd));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + i + 16 * q), w);
      const Pair8 sv = split_bf16x16(w);
      const int h = q / 2, c = q % 2;
      acc[4 * h + c] = _mm256_fmadd_ps(sv.even, sv.even, acc[4 * h + c]);
      acc[4 * h + 2 + c] = _mm256_fmadd_ps(sv.odd, sv.odd, acc[4 * h + 2 + c]);
    }
  }
  float part[64];
#pragma GCC unroll 8
  for (int a = 0; a < 8; ++a) _mm256_storeu_ps(part + 8 * a, acc[a]);
  for (; i < n; ++i) {
    s[i] = f32_to_bf16(bf16_to_f32(r[i]) + bf16_to_f32(x[i]));
    const float v = bf16_to_f32(s[i]);
    float& p = part[partial(i, DType::bf16)];
    p = std::fma(v, v, p);
  }
  return combine(part);
}

}  // namespace

float sum_squares_avx2(const void* x, DType t, int64_t n, const TuningParams&) {
  return t == DType::bf16 ? sum_squares_t<DType::bf16>(x, n) : sum_squares_t<DType::f32>(x, n);
}

float sum_avx2(const void* x, DType t, int64_t n, const TuningParams&) {
  return t == DType::bf16 ? sum_t<DType::bf16>(x, n) : sum_t<DType::f32>(x, n);
}

void shifted_sums_avx2(const void* x, DType t, float shift, int64_t n, float* sum_d, float* sum_d2,
                       const TuningParams&) {
  if (t == DType::bf16) shifted_sums_t<DType::bf16>(x, shift, n, sum_d, sum_d2);
  else shifted_sums_t<DType::f32>(x, shift, n, sum_d, sum_d2);
}

void scale_by_weight_avx2(const void* x, DType xt, float inv, const void* w, DType wt, void* y, DType yt,
                          int64_t n) {
  const __m256 s = _mm256_set1_ps(inv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(y, yt, i, _mm256_mul_ps(_mm256_mul_ps(load8(x, xt, i), s), load8(w, wt, i)));
  for (; i < n; ++i) {
    const float scaled = get(x, xt, i) * inv;
    put(y, yt, i, scaled * get(w, wt, i));
  }
}

void layernorm_apply_avx2(const void* x, DType xt, float shift, float dm_inv, float inv, const void* w,
                          const void* b, DType wt, void* y, DType yt, int64_t n) {
  const __m256 sh = _mm256_set1_ps(shift), s = _mm256_set1_ps(inv), dm = _mm256_set1_ps(dm_inv);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_fmsub_ps(_mm256_sub_ps(load8(x, xt, i), sh), s, dm);
    store8(y, yt, i, b ? _mm256_fmadd_ps(v, load8(w, wt, i), load8(b, wt, i)) : _mm256_mul_ps(v, load8(w, wt, i)));
  }
  for (; i < n; ++i) {
    const float v = std::fma(get(x, xt, i) - shift, inv, -dm_inv);
    put(y, yt, i, b ? std::fma(v, get(w, wt, i), get(b, wt, i)) : v * get(w, wt, i));
  }
}

void add_into_avx2(const void* x, DType xt, void* r, DType rt, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(r, rt, i, _mm256_add_ps(load8(r, rt, i), load8(x, xt, i)));
  for (; i < n; ++i) put(r, rt, i, get(r, rt, i) + get(x, xt, i));
}

float add_sum_squares_avx2(const void* x, DType xt, const void* r, DType rt, void* s, int64_t n,
                           const TuningParams& tp) {
  if (xt == DType::bf16 && rt == DType::bf16)
    return add_sum_squares_bf16(static_cast<const uint16_t*>(x), static_cast<const uint16_t*>(r),
                                static_cast<uint16_t*>(s), n);
  if (s != r) __builtin_memcpy(s, r, size_t(n) * dtype_size(rt));
  add_into_avx2(x, xt, s, rt, n);  // other types: two passes, the row in L1 for the second
  return sum_squares_avx2(s, rt, n, tp);
}

void rms_apply_bf16w_avx2(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                          const NextRows& next) {
  if (streams(stream, y)) rms_apply_rows<true>(x, inv, w, y, n, next);
  else rms_apply_rows<false>(x, inv, w, y, n, next);
}

float rms_apply_bf16w_next_avx2(const uint16_t* x, float inv, const uint16_t* w, uint16_t* y, int64_t n, bool stream,
                                const uint16_t* x_next, int64_t ahead_bytes, const TuningParams& tp) {
  if (streams(stream, y)) return rms_apply_next_rows<true>(x, inv, w, y, n, x_next, ahead_bytes, tp);
  return rms_apply_next_rows<false>(x, inv, w, y, n, x_next, ahead_bytes, tp);
}

}  // namespace sol::kernels
