// int8 GEMM micro-kernel for AVX2: u8 (A) x s8 (B) quads without vpdpbusd. vpmaddubsw would
// saturate (two 255 x 127 products overflow int16), so both operands are widened to int16
// lanes, even bytes and odd bytes apart, and vpmaddwd sums each (k, k+2) and (k+1, k+3) pair
// into int32 exactly: four quads' products per lane and step, like vpdpbusd's, wrapping
// modulo 2^32. Sub-tiles of 4 rows x 16 columns: 8 accumulators, 4 widened B vectors.
#include "kernels/x86/avx2/gemm_tile_avx2.h"

namespace sol::kernels {
namespace {

constexpr int kRowsS8 = 4;

template <int R>
struct SubS8 {
  static void run(const GemmTile& t, int i0, int col0, bool lead, const Chunk& c, SideWalk& side) {
    __m256i acc[R][2];
    int32_t* sums = static_cast<int32_t*>(c.sums);
    if (c.first) {
      __m256i init[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      if (t.start)
#pragma GCC unroll 6
        for (int h = 0; h < 2; ++h) {
          const int valid = vector_cols(t.n, col0 / 8 + h);
          if (valid > 0) init[h] = _mm256_maskload_epi32(t.start + col0 + 8 * h, lane_mask(valid));
        }
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i) acc[i][0] = init[0], acc[i][1] = init[1];
    } else {
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 6
        for (int h = 0; h < 2; ++h)
          acc[i][h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(sums + (i0 + i) * kGemmNR + col0 + 8 * h));
    }
    if (c.last) request_rows<R>(t, i0, col0);
    const int32_t* a = static_cast<const int32_t*>(t.a) + c.k0 * kGemmMR + i0;   // one u8 quad per int32
    const int32_t* b = static_cast<const int32_t*>(t.b) + c.k0 * kGemmNR + col0;  // 32 columns x 4 per quad
    const int64_t ahead = lead ? t.prefetch_b : 0;
    const __m256i low_bytes = _mm256_set1_epi16(0x00FF);
    SideWalk walk = lead ? side : SideWalk(t, false);  // local: see gemm_f32_avx2.cc
    for (int64_t p = c.k0; p < c.k1; ++p) {
      prefetch_b_step(b, ahead);  // lead: col0 = 0, the step's start
      walk.step();
      __m256i be[2], bo[2];
#pragma GCC unroll 6
      for (int h = 0; h < 2; ++h) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8 * h));
        be[h] = _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8);  // bytes 0, 2 of each quad, signed
        bo[h] = _mm256_srai_epi16(w, 8);                        // bytes 1, 3
      }
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const __m256i q = _mm256_set1_epi32(a[i]);
        const __m256i ae = _mm256_and_si256(q, low_bytes), ao = _mm256_srli_epi16(q, 8);
#pragma GCC unroll 6
        for (int h = 0; h < 2; ++h)
          acc[i][h] = _mm256_add_epi32(acc[i][h], _mm256_add_epi32(_mm256_madd_epi16(ae, be[h]),
                                                                   _mm256_madd_epi16(ao, bo[h])));
      }
      a += kGemmMR;
      b += kGemmNR;
    }
    if (lead) side = walk;
    if (!c.last) {
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i)
#pragma GCC unroll 6
        for (int h = 0; h < 2; ++h)
          _mm256_store_si256(reinterpret_cast<__m256i*>(sums + (i0 + i) * kGemmNR + col0 + 8 * h), acc[i][h]);
      return;
    }
    const int v0 = vector_cols(t.n, col0 / 8), v1 = vector_cols(t.n, col0 / 8 + 1);
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      finish8_s32(acc[i][0], i0 + i, col0, v0, t);
      finish8_s32(acc[i][1], i0 + i, col0 + 8, v1, t);
    }
  }
};

}  // namespace

void gemm_tile_s8_avx2(const GemmTile& t) {
  run_subtiles<SubS8, kRowsS8>(t, std::make_integer_sequence<int, kRowsS8>{});
}

}  // namespace sol::kernels
