#pragma once
// Shared by the AVX-512 GEMM kernels (gemm_f32_avx512.cc, gemm_bf16_avx512.cc): how a register
// tile of f32 sums starts (zero or the running partial sums) and how it ends (back into the
// partial sums, or through the epilogue into D). Included only by AVX-512 translation units;
// everything stays in an anonymous namespace so no baseline code can ever link to it.

// GCC 12's own _mm512_undefined_* helpers trip -Wuninitialized once inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>
#include <utility>

#include "kernels/gemm.h"

namespace sol::kernels {
namespace {

// Lane masks of the tile's two 16-column vectors for n valid columns (1..32).
struct ColumnMasks {
  __mmask16 lo, hi;
  explicit ColumnMasks(int n)
      : lo(__mmask16(n >= 16 ? 0xFFFF : (1u << n) - 1)),
        hi(__mmask16(n >= 32 ? 0xFFFF : n > 16 ? (1u << (n - 16)) - 1 : 0)) {}
  __mmask16 operator[](int half) const { return half ? hi : lo; }
};

// exp(t) = 2^n * e^r with n = round(t / ln 2), |r| <= ln2 / 2; e^r by its degree-7 Taylor
// polynomial (error ~5e-9 relative). scalef saturates to inf / 0 exactly like exp does.
__m512 exp_avx512(__m512 t) {
  t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(1000.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(1.44269504f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), t);  // ln 2, high part
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);       // ln 2, low part
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  return _mm512_scalef_ps(p, n);
}

// x / (1 + exp(-x)): x itself is the numerator, so a NaN x stays NaN, and -inf gives
// -inf / inf = NaN exactly as the reference computes it.
__m512 silu_avx512(__m512 x) {
  const __m512 e = exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

__m512 load_f32_or_bf16(const void* p, bool bf16, __mmask16 mask) {
  if (!bf16) return _mm512_maskz_loadu_ps(mask, p);
  const __m256i bits = _mm256_maskz_loadu_epi16(mask, p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

void store_f32_or_bf16(void* p, bool bf16, __mmask16 mask, __m512 v) {
  if (!bf16) return _mm512_mask_storeu_ps(p, mask, v);
  _mm256_mask_storeu_epi16(p, mask, __m256i(_mm512_cvtneps_pbh(v)));
}

// D's row i (and C's, when beta reads it) of a tile that ends its K loop with the epilogue:
// requested before the loop, so a D larger than the caches is not written by 24 store misses
// in a burst after it (docs/perf/gemm.md). Into L2 only: D's 24 lines are written once, ~400 ns
// later, and pulled into L1 they pushed out the B panel and A rows the K loop reads.
__attribute__((always_inline)) inline void prefetch_output_row(const GemmEpilogue& e, int i) {
  const int64_t es = e.d_bf16 ? 2 : 4;
  const char* d = static_cast<const char*>(e.d) + i * e.ldd * es;
  _mm_prefetch(d, _MM_HINT_T1);
  _mm_prefetch(d + 16 * es, _MM_HINT_T1);
  if (e.beta != 0.0f) {
    const char* c = static_cast<const char*>(e.c) + i * e.ldc * es;
    _mm_prefetch(c, _MM_HINT_T0);
    _mm_prefetch(c + 16 * es, _MM_HINT_T0);
  }
}

// Accumulators start at zero; the running sums of earlier K blocks (and C on the last block)
// are only requested here and added after the K loop. A tile's 12 rows of D are 24 lines
// 4 KiB-or-more apart that were evicted since the previous K block: loading them up front
// stalled the FMAs for ~20% of the time, prefetching them hides the misses behind the loop.
template <int MR>
__attribute__((always_inline)) inline void start_tile(__m512 (&acc)[MR][2], const GemmTile& t) {
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    if (!t.first) {
      _mm_prefetch(reinterpret_cast<const char*>(t.partial + i * t.ldp), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(t.partial + i * t.ldp + 16), _MM_HINT_T0);
    }
    if (t.last) prefetch_output_row(*t.last, i);
  }
}

// The value D's vector (row i, columns 16h..16h+15) gets on the last K block from the sums v:
// act(alpha * v + beta * C + bias).
__attribute__((always_inline)) inline __m512 end_value(__m512 v, int i, int h, const GemmEpilogue& e,
                                                       const ColumnMasks& mask) {
  const int64_t es = e.d_bf16 ? 2 : 4;
  v = _mm512_mul_ps(v, _mm512_set1_ps(e.alpha));
  if (e.beta != 0.0f) {
    const char* c = static_cast<const char*>(e.c) + (i * e.ldc + 16 * h) * es;
    v = _mm512_fmadd_ps(load_f32_or_bf16(c, e.d_bf16, mask[h]), _mm512_set1_ps(e.beta), v);
  }
  if (e.bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask[h], e.bias + 16 * h));
  if (e.silu) v = silu_avx512(v);
  return v;
}

// One vector of a tile's row i (columns 16h..16h+15) after its K block: plus the running
// partial sums, then either back into them or through the epilogue into D. The AVX-512 tiles
// call it from registers, the AMX tiles from the sums their accumulators were stored to.
__attribute__((always_inline)) inline void finish_vector(__m512 v, int i, int h, const GemmTile& t,
                                                         const ColumnMasks& mask) {
  if (!t.first) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask[h], t.partial + i * t.ldp + 16 * h));
  if (!t.last) return _mm512_mask_storeu_ps(t.partial + i * t.ldp + 16 * h, mask[h], v);
  const GemmEpilogue& e = *t.last;
  const int64_t es = e.d_bf16 ? 2 : 4;
  store_f32_or_bf16(static_cast<char*>(e.d) + (i * e.ldd + 16 * h) * es, e.d_bf16, mask[h], end_value(v, i, h, e, mask));
}

// The int32 counterpart for the int8 tiles (AVX-512 and AMX): sums are exact modulo 2^32, the
// partial sums and D hold int32, and the epilogue is C (beta 0 or 1) plus the sums.
// The value D's int32 vector (row i, columns 16h..16h+15) gets on the last K block: C + sums.
__attribute__((always_inline)) inline __m512i end_value_s32(__m512i v, int i, int h, const GemmEpilogue& e,
                                                           const ColumnMasks& mask) {
  if (e.beta != 0.0f)
    v = _mm512_add_epi32(v, _mm512_maskz_loadu_epi32(mask[h], static_cast<const int32_t*>(e.c) + i * e.ldc + 16 * h));
  return v;
}

__attribute__((always_inline)) inline void finish_vector_s32(__m512i v, int i, int h, const GemmTile& t,
                                                             const ColumnMasks& mask) {
  int32_t* partial = reinterpret_cast<int32_t*>(t.partial);
  if (!t.first) v = _mm512_add_epi32(v, _mm512_maskz_loadu_epi32(mask[h], partial + i * t.ldp + 16 * h));
  if (!t.last) return _mm512_mask_storeu_epi32(partial + i * t.ldp + 16 * h, mask[h], v);
  const GemmEpilogue& e = *t.last;
  _mm512_mask_storeu_epi32(static_cast<int32_t*>(e.d) + i * e.ldd + 16 * h, mask[h], end_value_s32(v, i, h, e, mask));
}

// The short end of most tiles: one K block, and alpha is all the epilogue does (no C, bias or
// SiLU); for int32 sums, no C. There D = alpha * sums is stored with the epilogue's fields read
// once. The general path tests them once per vector and reloads them after every store
// (stores through char* may alias them), which cost a short tile more than half its fixed
// cost (operands in L1).
inline bool ends_with_alpha_only(const GemmTile& t) {
  return t.first && t.last && t.last->beta == 0.0f && !t.last->bias && !t.last->silu;
}
inline bool ends_with_sums_only(const GemmTile& t) { return t.first && t.last && t.last->beta == 0.0f; }

// One row of D (32 columns from `row`) = alpha * (v0, v1).
template <bool kBf16>
__attribute__((always_inline)) inline void store_row_scaled(char* row, __m512 v0, __m512 v1, __m512 alpha,
                                                            const ColumnMasks& mask) {
  constexpr int64_t es = kBf16 ? 2 : 4;
  const __m512 v[2] = {_mm512_mul_ps(v0, alpha), _mm512_mul_ps(v1, alpha)};
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    if constexpr (kBf16) _mm256_mask_storeu_epi16(row + 16 * h * es, mask[h], __m256i(_mm512_cvtneps_pbh(v[h])));
    else _mm512_mask_storeu_ps(row + 16 * h * es, mask[h], v[h]);
  }
}

// acc + partial, then either back into the partial sums or through the epilogue into D.
template <int MR>
__attribute__((always_inline)) inline void finish_tile(__m512 (&acc)[MR][2], const GemmTile& t, const ColumnMasks& mask) {
  if (ends_with_alpha_only(t)) {
    const GemmEpilogue& e = *t.last;
    const __m512 alpha = _mm512_set1_ps(e.alpha);
    char* d = static_cast<char*>(e.d);
    if (e.d_bf16) {
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) store_row_scaled<true>(d + i * e.ldd * 2, acc[i][0], acc[i][1], alpha, mask);
    } else {
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) store_row_scaled<false>(d + i * e.ldd * 4, acc[i][0], acc[i][1], alpha, mask);
    }
    return;
  }
  // Unrolled and inlined, so the 24 accumulators stay in registers: as a call with a loop
  // they went through the stack, 48 extra moves per tile.
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) finish_vector(acc[i][h], i, h, t, mask);
}

// The AMX tiles' end, from the sums their accumulators were stored to (m rows of 32).
inline void finish_rows(const float (*sums)[32], int m, const GemmTile& t, const ColumnMasks& mask) {
  if (ends_with_alpha_only(t)) {
    const GemmEpilogue& e = *t.last;
    const __m512 alpha = _mm512_set1_ps(e.alpha);
    char* d = static_cast<char*>(e.d);
    for (int i = 0; i < m; ++i) {
      const __m512 v0 = _mm512_load_ps(&sums[i][0]), v1 = _mm512_load_ps(&sums[i][16]);
      if (e.d_bf16) store_row_scaled<true>(d + i * e.ldd * 2, v0, v1, alpha, mask);
      else store_row_scaled<false>(d + i * e.ldd * 4, v0, v1, alpha, mask);
    }
    return;
  }
  for (int i = 0; i < m; ++i)
    for (int h = 0; h < 2; ++h) finish_vector(_mm512_load_ps(&sums[i][16 * h]), i, h, t, mask);
}

inline void finish_rows_s32(const int32_t (*sums)[32], int m, const GemmTile& t, const ColumnMasks& mask) {
  if (ends_with_sums_only(t)) {
    int32_t* d = static_cast<int32_t*>(t.last->d);
    const int64_t ldd = t.last->ldd;
    for (int i = 0; i < m; ++i, d += ldd)
      for (int h = 0; h < 2; ++h) _mm512_mask_storeu_epi32(d + 16 * h, mask[h], _mm512_load_si512(&sums[i][16 * h]));
    return;
  }
  for (int i = 0; i < m; ++i)
    for (int h = 0; h < 2; ++h) finish_vector_s32(_mm512_load_si512(&sums[i][16 * h]), i, h, t, mask);
}

// The side stream's lines (GemmTile::side: rows interleaved, every row's first lines first).
class SideLines {
 public:
  explicit SideLines(const GemmTile& t)
      : line_(t.side), first_(t.side), rows_(t.side_rows), row_stride_(t.side_row_stride),
        left_(t.side ? t.side_rows * t.side_lines : 0), l2_(t.side_l2) {}
  int64_t left() const { return left_; }
  // Requests the next line: down the rows, then every row's next line.
  __attribute__((always_inline)) void one() {
    if (l2_) _mm_prefetch(line_, _MM_HINT_T1);
    else _mm_prefetch(line_, _MM_HINT_T0);
    --left_;
    if (++row_ == rows_) {
      row_ = 0;
      first_ += 64;  // the rows' next line
      line_ = first_;
    } else {
      line_ += row_stride_;
    }
  }

 private:
  const char* line_;
  const char* first_;
  int64_t row_ = 0, rows_, row_stride_, left_;
  bool l2_;
};

// The side stream (GemmTile::side), rows interleaved, one line per K step. One contiguous run
// longer than the tile's steps (a whole next B panel: two lines a step) takes two lines a
// step; interleaved rows keep one, even when that leaves some unrequested: rows pages apart
// cost a page walk each, and requesting all of decode's plain nn B rows was slower
// (docs/perf/gemm.md, tried and rejected).
class SideWalk {
 public:
  explicit SideWalk(const GemmTile& t) : lines_(t), two_(t.side_rows == 1 && lines_.left() > t.k_steps) {}
  __attribute__((always_inline)) void step() {
    if (lines_.left() <= 0) return;
    lines_.one();
    if (two_ && lines_.left() > 0) lines_.one();
  }

 private:
  SideLines lines_;
  bool two_;
};

// Every K step of a B panel is 128 bytes (32 columns x 4 bytes: f32, a bf16 pair, an int8
// quad): two cache lines, requested `ahead` bytes before the kernel reads them.
__attribute__((always_inline)) inline void prefetch_b_step(const void* b, int64_t ahead) {
  if (!ahead) return;
  const char* p = static_cast<const char*>(b) + ahead;
  _mm_prefetch(p, _MM_HINT_T0);
  _mm_prefetch(p + 64, _MM_HINT_T0);
}

// Calls kernel<MR> for the tile's row count, 1..kGemmMR, through a table built at compile time.
template <template <int> class Kernel, int... Rows>
void dispatch_rows(const GemmTile& t, std::integer_sequence<int, Rows...>) {
  using Fn = void (*)(const GemmTile&);
  static constexpr Fn table[] = {&Kernel<Rows + 1>::run...};
  table[t.m - 1](t);
}

// The same for the two-panel decode kernels (rows 1..kGemmPairMaxRows, from t0.m).
template <template <int> class Kernel, int... Rows>
void dispatch_pair_rows(const GemmTile& t0, const GemmTile& t1, std::integer_sequence<int, Rows...>) {
  using Fn = void (*)(const GemmTile&, const GemmTile&);
  static constexpr Fn table[] = {&Kernel<Rows + 1>::run...};
  table[t0.m - 1](t0, t1);
}

}  // namespace
}  // namespace sol::kernels
