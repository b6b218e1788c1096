// AVX2 row kernels of the norms: the portable members of the norm table (sums, scale by
// weight, layernorm's apply, the residual add), bit for bit the scalar ones. The sums keep the
// 64 partial sums of kernels/norm.h as eight 8-lane accumulators, accumulator A holding
// partial sums 8A..8A+7, so every partial sum sees its elements in the scalar order; the rest
// of a row after its last whole block of 64 goes through the same partial sums one element at
// a time, then they combine in the scalar order. Elementwise results round as the scalar ones
// (f32x8_to_bf16 is f32_to_bf16), and the residual add fused with its sum of squares. The bf16
// row pipelines of rmsnorm and layernorm are in norm_rows_avx2.cc.
//
// Scalar code here is compiled with FMA enabled and GCC contracts a * b + c by default: every
// expression below that the scalar path rounds twice is written with no add next to a product.

#include <immintrin.h>

#include <cmath>

#include "kernels/norm.h"
#include "kernels/x86/avx2/norm_order_avx2.h"
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

// s = round(r + x) for all-bf16 rows (add_into's bits) and the sum of s^2 as stored (sum_squares'
// order and bits) in one pass: each chunk's sum rounded by bf16_pairs (bf16 operands), stored,
// and its stored words split again for the squares.
float add_sum_squares_bf16(const uint16_t* x, const uint16_t* r, uint16_t* s, int64_t n) {
  SquareSums sums;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m256 v[8];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      const Pair8 xv = load_bf16x16(x + i + 16 * q), rv = load_bf16x16(r + i + 16 * q);
      const __m256i w = bf16_pairs(_mm256_add_ps(rv.even, xv.even), _mm256_add_ps(rv.odd, xv.odd));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(s + i + 16 * q), w);
      place_chunk(w, q, v);
    }
    sums.block(v);
  }
  sums.spill();
  for (; i < n; ++i) {
    s[i] = f32_to_bf16(bf16_to_f32(r[i]) + bf16_to_f32(x[i]));
    sums.one(i, bf16_to_f32(s[i]));
  }
  return combine(sums.part);
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

}  // namespace sol::kernels
