// int8 GEMM micro-kernel: a 12 x 32 tile in 24 zmm int32 accumulators; each vpdpbusd adds the
// four u8 x s8 products of one (k..k+3) quad of A (broadcast as 32 bits) with the same quad of
// 16 columns of B. Integer sums are exact and wrap modulo 2^32, so the order of K blocks and
// the s8 -> u8 shift of A (undone by the start values) never change a result.
#include "kernels/x86/avx512/gemm_tile_avx512.h"

namespace sol::kernels {
namespace {

template <int MR>
struct TileS8 {
  static void run(const GemmTile& t) {
    const ColumnMasks mask(t.n);
    __m512i init[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    if (t.start)
      for (int h = 0; h < 2; ++h) init[h] = _mm512_maskz_loadu_epi32(mask[h], t.start + 16 * h);
    int32_t* partial = reinterpret_cast<int32_t*>(t.partial);
    __m512i acc[MR][2];
    for (int i = 0; i < MR; ++i) {
      acc[i][0] = init[0];
      acc[i][1] = init[1];
      if (!t.first) {
        _mm_prefetch(reinterpret_cast<const char*>(partial + i * t.ldp), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(partial + i * t.ldp + 16), _MM_HINT_T0);
      }
    }
    const int32_t* a = static_cast<const int32_t*>(t.a);  // one u8 quad per int32
    const int8_t* b = static_cast<const int8_t*>(t.b);     // 32 columns x 4 per quad
    for (int64_t p = 0; p < t.k_steps; ++p) {
      const __m512i b0 = _mm512_loadu_si512(b);
      const __m512i b1 = _mm512_loadu_si512(b + 64);
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        const __m512i ai = _mm512_set1_epi32(a[i]);
        acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], ai, b0);
        acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], ai, b1);
      }
      a += kGemmMR;
      b += 4 * kGemmNR;
    }
    if (!t.first)
      for (int i = 0; i < MR; ++i)
        for (int h = 0; h < 2; ++h)
          acc[i][h] = _mm512_add_epi32(acc[i][h], _mm512_maskz_loadu_epi32(mask[h], partial + i * t.ldp + 16 * h));
    if (!t.last) {
      for (int i = 0; i < MR; ++i)
        for (int h = 0; h < 2; ++h) _mm512_mask_storeu_epi32(partial + i * t.ldp + 16 * h, mask[h], acc[i][h]);
      return;
    }
    const GemmEpilogue& e = *t.last;
    for (int i = 0; i < MR; ++i) {
      for (int h = 0; h < 2; ++h) {
        __m512i v = acc[i][h];
        if (e.beta != 0.0f)
          v = _mm512_add_epi32(v, _mm512_maskz_loadu_epi32(mask[h], static_cast<const int32_t*>(e.c) + i * e.ldc + 16 * h));
        _mm512_mask_storeu_epi32(static_cast<int32_t*>(e.d) + i * e.ldd + 16 * h, mask[h], v);
      }
    }
  }
};

}  // namespace

void gemm_tile_s8_avx512(const GemmTile& t) {
  dispatch_rows<TileS8>(t, std::make_integer_sequence<int, kGemmMR>{});
}

}  // namespace sol::kernels
