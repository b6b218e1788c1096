// Flash attention's tile products on AVX2 + FMA: attention_scalar.cc's arithmetic, eight columns
// a vector, so every path below AVX-512 gives the scalar path's bits at vector speed (the plain
// loops call libm's fmaf per product where the baseline build has no FMA instruction).
//   f32:  acc = fma(a, b, acc) per k, in k order.
//   bf16: acc += a0 * b0 + a1 * b1 per k pair; bf16 products are exact in f32, so the only
//         roundings are the pair's sum and the add into acc, whichever way the sum is formed.
// finish() rounds c * row_scale before adding the sums; ISA files are built without
// contraction (cmake/SolIsaFlags.cmake), so no product is fused into an add the scalar code
// rounds separately.
#include <immintrin.h>

#include <cstdint>

#include "kernels/attention.h"

namespace sol::kernels {
namespace {

constexpr int kVectors = kAttnPanel / 8;

// Two rows at a time (8 accumulators, 4 B vectors, 2 broadcasts): a K step loads each B line
// once for both rows.
template <int R, bool kBf16>
[[gnu::always_inline]] inline void rows_product(const AttnGemmTile& t, int i0, __m256 (&acc)[R][kVectors]) {
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < kVectors; ++v) acc[i][v] = _mm256_setzero_ps();
  if constexpr (!kBf16) {
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
  } else {
    const uint16_t* a = static_cast<const uint16_t*>(t.a) + i0 * t.lda;
    const uint32_t* b = static_cast<const uint32_t*>(t.b);  // (k, k+1) pairs, 32 columns a step
    const __m256i high = _mm256_set1_epi32(int(0xFFFF0000u));
    for (int64_t k = 0; k < t.k_steps; ++k, b += kAttnPanel) {
      __m256 b0[kVectors], b1[kVectors];
      for (int v = 0; v < kVectors; ++v) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8 * v));
        b0[v] = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
        b1[v] = _mm256_castsi256_ps(_mm256_and_si256(w, high));
      }
      for (int i = 0; i < R; ++i) {
        const uint16_t* pair = a + i * t.lda + 2 * k;
        const __m256 x0 = _mm256_castsi256_ps(_mm256_set1_epi32(int(uint32_t(pair[0]) << 16)));
        const __m256 x1 = _mm256_castsi256_ps(_mm256_set1_epi32(int(uint32_t(pair[1]) << 16)));
        for (int v = 0; v < kVectors; ++v)
          acc[i][v] = _mm256_add_ps(acc[i][v], _mm256_add_ps(_mm256_mul_ps(x0, b0[v]), _mm256_mul_ps(x1, b1[v])));
      }
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

template <bool kBf16>
void tile(const AttnGemmTile& t) {
  int i = 0;
  for (; i + 2 <= t.m; i += 2) {
    __m256 acc[2][kVectors];
    rows_product<2, kBf16>(t, i, acc);
    finish_rows<2>(t, i, acc);
  }
  if (i < t.m) {
    __m256 acc[1][kVectors];
    rows_product<1, kBf16>(t, i, acc);
    finish_rows<1>(t, i, acc);
  }
}

}  // namespace

void attn_gemm_tile_f32_avx2(const AttnGemmTile& t) { tile<false>(t); }
void attn_gemm_tile_bf16_avx2(const AttnGemmTile& t) { tile<true>(t); }

}  // namespace sol::kernels
