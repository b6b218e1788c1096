// Flash attention's tile products on AVX2 + FMA.
//   f32:  attention_scalar.cc's arithmetic, eight columns a vector, so it gives the scalar
//         path's bits at vector speed (the plain loops call libm's fmaf per product where the
//         baseline build has no FMA instruction): acc = fma(a, b, acc) per k, in k order;
//         finish() rounds c * row_scale before adding the sums (ISA files are built without
//         contraction, cmake/SolIsaFlags.cmake).
//   bf16: the avx512 level's FMA variant (attn_gemm_tile_bf16_widened_avx512), its bits: A rows
//         widened to f32 once where they are gathered or written (attn_gather_widened_avx2, the
//         rows' p_widened / out_widened), acc = fma(a1, b1, fma(a0, b0, acc)) per k pair, then
//         fma(c, row_scale, acc). AVX2 has no bf16 dot product, and the plain tile's two
//         products and two adds per pair on two rows ran at a third of the FMA peak.
//
// The row primitives (online softmax, score gradients) are attention_avx512.cc's, eight columns
// a vector: exp8 (exp_avx2.h) for libm's exp and sums in eight lanes, so they hold the scalar
// rows' results to the tests' tolerance, not their bits, as the AVX-512 ones do.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/convert.h"
#include "kernels/x86/avx2/codes_avx2.h"
#include "kernels/x86/avx2/exp_avx2.h"
#include "kernels/x86/avx2/subtile_avx2.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {
namespace {

constexpr int kVectors = kAttnPanel / 8;

// Two rows at a time (8 accumulators, 4 B vectors, 2 broadcasts): a K step loads each B line
// once for both rows.
template <int R>
[[gnu::always_inline]] inline void rows_product(const AttnGemmTile& t, int i0, __m256 (&acc)[R][kVectors]) {
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < kVectors; ++v) acc[i][v] = _mm256_setzero_ps();
  const float* a = static_cast<const float*>(t.a) + i0 * t.lda;
  const float* b = static_cast<const float*>(t.b);
  for (int64_t k = 0; k < t.k_steps; ++k, b += kAttnPanel) {
    __m256 bv[kVectors];
    for (int v = 0; v < kVectors; ++v) bv[v] = _mm256_loadu_ps(b + 8 * v);
    for (int i = 0; i < R; ++i) {
      const __m256 x = _mm256_broadcast_ss(a + i * t.lda + k);
      for (int v = 0; v < kVectors; ++v) acc[i][v] = _mm256_fmadd_ps(x, bv[v], acc[i][v]);
    }
  }
}

// C rows i0.. = acc (or c * row_scale + acc), the first t.n columns.
template <int R>
void finish_rows(const AttnGemmTile& t, int i0, const __m256 (&acc)[R][kVectors]) {
  for (int i = 0; i < R; ++i) {
    alignas(32) float sums[kAttnPanel];
    for (int v = 0; v < kVectors; ++v) _mm256_store_ps(sums + 8 * v, acc[i][v]);
    float* c = t.c + (i0 + i) * t.ldc;
    const float rs = t.row_scale ? t.row_scale[i0 + i] : 1.0f;
    for (int j = 0; j < t.n; ++j) c[j] = t.accumulate ? c[j] * rs + sums[j] : sums[j];
  }
}

void tile_f32(const AttnGemmTile& t) {
  int i = 0;
  for (; i + 2 <= t.m; i += 2) {
    __m256 acc[2][kVectors];
    rows_product<2>(t, i, acc);
    finish_rows<2>(t, i, acc);
  }
  if (i < t.m) {
    __m256 acc[1][kVectors];
    rows_product<1>(t, i, acc);
    finish_rows<1>(t, i, acc);
  }
}

// The widened bf16 tile as sub-tiles of R rows (up to 6) x 16 columns: 12 accumulators, two
// widened B vectors and a broadcast, as the avx2 GEMM's FMA tile. Every row's first products of
// a step, then every row's second: each accumulator still takes its pair in order.
template <int R>
struct WidenedRows {
  static void run(const AttnGemmTile& t, int i0, int col0) {
    AccF32 acc[R][2];
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = AccF32(_mm256_setzero_ps());
    const float* a = static_cast<const float*>(t.a) + i0 * t.lda;
    const uint32_t* b = static_cast<const uint32_t*>(t.b) + col0;  // (k, k+1) pairs, 32 columns a step
    alignas(32) static const uint32_t kHigh[8] = {0xFFFF0000u, 0xFFFF0000u, 0xFFFF0000u, 0xFFFF0000u,
                                                  0xFFFF0000u, 0xFFFF0000u, 0xFFFF0000u, 0xFFFF0000u};
    for (int64_t k = 0; k < t.k_steps; ++k, b += kAttnPanel) {
      // The mask read from memory on every step (the pointer hidden from the optimiser): held
      // in a register it took the 16th ymm and GCC kept four accumulators on the stack.
      const uint32_t* high_bits = kHigh;
      asm("" : "+r"(high_bits));
      const __m256i high = _mm256_load_si256(reinterpret_cast<const __m256i*>(high_bits));
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8));
      // acc[i] += A[i][2k + second] * (b0, b1) for the R rows.
      const auto products = [&](int second, __m256 b0, __m256 b1) __attribute__((always_inline)) {
#pragma GCC unroll 6
        for (int i = 0; i < R; ++i) {
          const __m256 x = _mm256_broadcast_ss(a + i * t.lda + 2 * k + second);
          acc[i][0] = AccF32(_mm256_fmadd_ps(x, b0, __m256(acc[i][0])));
          acc[i][1] = AccF32(_mm256_fmadd_ps(x, b1, __m256(acc[i][1])));
        }
      };
      products(0, _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16)));
      products(1, _mm256_castsi256_ps(_mm256_and_si256(w0, high)), _mm256_castsi256_ps(_mm256_and_si256(w1, high)));
    }
    // C = acc, or fma(c, row_scale, acc): the columns col0.. below t.n.
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      float* c = t.c + (i0 + i) * t.ldc + col0;
      const __m256 scale = _mm256_set1_ps(t.row_scale ? t.row_scale[i0 + i] : 1.0f);
#pragma GCC unroll 2
      for (int v = 0; v < 2; ++v) {
        const int valid = vector_cols(t.n, col0 / 8 + v);
        if (valid == 0) continue;
        const __m256i lanes = lane_mask(valid);
        __m256 out = __m256(acc[i][v]);
        if (t.accumulate) out = _mm256_fmadd_ps(_mm256_maskload_ps(c + 8 * v, lanes), scale, out);
        _mm256_maskstore_ps(c + 8 * v, lanes, out);
      }
    }
  }
};

void tile_bf16_widened(const AttnGemmTile& t) {
  using Fn = void (*)(const AttnGemmTile&, int, int);
  static constexpr Fn table[] = {&WidenedRows<1>::run, &WidenedRows<2>::run, &WidenedRows<3>::run,
                                 &WidenedRows<4>::run, &WidenedRows<5>::run, &WidenedRows<6>::run};
  const int rows = balanced_rows(t.m, 6);
  for (int col0 = 0; col0 < t.n; col0 += 16)
    for (int i0 = 0; i0 < t.m; i0 += rows) table[std::min(rows, t.m - i0) - 1](t, i0, col0);
}

// Lanes of columns c..c+7 inside [lo, hi), as an all-ones mask per lane.
[[gnu::always_inline]] inline __m256 visible8(int c, int lo, int hi) {
  const __m256i col = _mm256_add_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i in = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(lo), col),
                                         _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), col));
  return _mm256_castsi256_ps(in);
}

// Stores 8 values as f32 or bf16 (round to nearest even, as f32_to_bf16), or as the f32 of that
// bf16 (widened), and returns what was kept, as f32.
[[gnu::always_inline]] inline __m256 store_row8(void* p, int64_t i, bool bf16, bool widened, __m256 v) {
  if (!bf16) {
    _mm256_storeu_ps(static_cast<float*>(p) + i, v);
    return v;
  }
  const __m256i codes = f32x8_to_bf16(v);  // in the low halves of the lanes
  const __m256 kept = _mm256_castsi256_ps(_mm256_slli_epi32(codes, 16));
  if (widened) {
    _mm256_storeu_ps(static_cast<float*>(p) + i, kept);
  } else {
    const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(codes), _mm256_extracti128_si256(codes, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(static_cast<uint16_t*>(p) + i), packed);
  }
  return kept;
}

float max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return std::max(_mm_cvtss_f32(m), _mm_cvtss_f32(_mm_shuffle_ps(m, m, 1)));
}

float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}

}  // namespace

void attn_gemm_tile_f32_avx2(const AttnGemmTile& t) { tile_f32(t); }
void attn_gemm_tile_bf16_widened_avx2(const AttnGemmTile& t) { tile_bf16_widened(t); }

void attn_gather_widened_avx2(const void* src, int64_t stride_bytes, int64_t rows, int64_t cols, float* dst) {
  for (int64_t i = 0; i < rows; ++i)
    convert_avx2(static_cast<const char*>(src) + i * stride_bytes, DType::bf16, dst + i * cols, DType::f32, cols,
                 false, 0);
}

void attn_store_rows_avx2(const AttnStoreRows& r) {
  // acc * (row_scale * scale): one product, rounded to bf16 as f32_to_bf16: the scalar bits.
  const DType t = r.bf16 ? DType::bf16 : DType::f32;
  for (int64_t i = 0; i < r.m; ++i) {
    const __m256 s = _mm256_set1_ps((r.row_scale ? r.row_scale[i] : 1.0f) * r.scale);
    const float* acc = r.acc + i * r.lda;
    char* out = static_cast<char*>(r.out) + i * r.ldo * (r.bf16 ? 2 : 4);
    int64_t d = 0;
    for (; d + 8 <= r.n; d += 8) store8(out, t, d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), s));
    if (d < r.n) store8_n(out, t, d, r.n - d, _mm256_mul_ps(load8_n(acc, DType::f32, d, r.n - d), s));
  }
}

void attn_softmax_rows_avx2(const AttnSoftmaxRows& r) {
  const __m256 scale = _mm256_set1_ps(r.scale);
  for (int i = 0; i < r.m; ++i) {
    const float* s = r.s + i * r.lds;
    const int lo = std::clamp(r.lo[i], 0, r.n), hi = std::clamp(r.hi[i], lo, r.n);
    const bool all = lo == 0 && hi == r.n;
    __m256 mx = _mm256_set1_ps(-INFINITY), nan = _mm256_setzero_ps();
    if (hi > lo)
      for (int c = 0; c < r.n; c += 8) {
        const __m256 v = _mm256_loadu_ps(s + c);
        const __m256 in = all ? _mm256_castsi256_ps(_mm256_set1_epi32(-1)) : visible8(c, lo, hi);
        nan = _mm256_or_ps(nan, _mm256_and_ps(in, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
        mx = _mm256_blendv_ps(mx, _mm256_max_ps(mx, v), in);  // NaN lanes are caught above
      }
    const float old = r.row_max[i];
    // A NaN score makes the running maximum NaN, and with it every later P and the row's sum.
    const float now = _mm256_movemask_ps(nan) ? NAN : hi > lo ? std::max(old, max8(mx) * r.scale) : old;
    const int64_t row = i * r.ldp;
    if (now == -INFINITY) {  // nothing seen yet: the output row is still all zeros
      r.alpha[i] = 1.0f;
      for (int c = 0; c < r.n; c += 8) store_row8(r.p, row + c, r.p_bf16, r.p_widened, _mm256_setzero_ps());
      continue;
    }
    r.alpha[i] = std::exp(old - now);
    const __m256 vnow = _mm256_set1_ps(now);
    __m256 sum = _mm256_setzero_ps();
    for (int c = 0; c < r.n; c += 8) {
      __m256 e = exp8(_mm256_fmsub_ps(_mm256_loadu_ps(s + c), scale, vnow));
      if (!all) e = _mm256_and_ps(e, visible8(c, lo, hi));
      sum = _mm256_add_ps(sum, store_row8(r.p, row + c, r.p_bf16, r.p_widened, e));
    }
    r.row_max[i] = now;
    r.row_sum[i] = r.row_sum[i] * r.alpha[i] + sum8(sum);
  }
}

void attn_grad_rows_avx2(const AttnGradRows& r) {
  const __m256 scale = _mm256_set1_ps(r.scale);
  for (int i = 0; i < r.m; ++i) {
    const int lo = std::clamp(r.lo[i], 0, r.n), hi = std::clamp(r.hi[i], lo, r.n);
    const float* s = r.s + i * r.ld;
    const float* dp = r.dp + i * r.ld;
    const int64_t row = i * r.ldo;
    const __m256 row_lse = _mm256_set1_ps(r.per_column ? 0.0f : r.lse[i]);
    const __m256 row_delta = _mm256_set1_ps(r.per_column ? 0.0f : r.delta[i]);
    for (int c = 0; c < r.n; c += 8) {
      __m256 p = _mm256_setzero_ps(), ds = _mm256_setzero_ps();
      if (c + 8 > lo && c < hi) {
        const __m256 lse = r.per_column ? _mm256_loadu_ps(r.lse + c) : row_lse;
        const __m256 delta = r.per_column ? _mm256_loadu_ps(r.delta + c) : row_delta;
        p = _mm256_and_ps(exp8(_mm256_fmsub_ps(_mm256_loadu_ps(s + c), scale, lse)), visible8(c, lo, hi));
        ds = _mm256_mul_ps(p, _mm256_sub_ps(_mm256_loadu_ps(dp + c), delta));
      }
      if (r.p) store_row8(r.p, row + c, r.out_bf16, r.out_widened, p);
      store_row8(r.ds, row + c, r.out_bf16, r.out_widened, ds);
    }
  }
}

}  // namespace sol::kernels
