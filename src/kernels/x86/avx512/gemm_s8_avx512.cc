// int8 GEMM micro-kernel: a 12 x 32 tile in 24 zmm int32 accumulators; each vpdpbusd adds the
// four u8 x s8 products of one (k..k+3) quad of A (broadcast as 32 bits) with the same quad of
// 16 columns of B. Integer sums are exact and wrap modulo 2^32, so the order of K blocks and
// the s8 -> u8 shift of A (undone by the start values) never change a result.
#include "kernels/x86/avx512/gemm_tile_avx512.h"

namespace sol::kernels {
namespace {

// The accumulators are a plain int vector type: __m512i is declared may_alias, and GCC 12 then
// keeps an array of them in memory (a load, vpdpbusd and store per instruction, half of
// vdpbf16ps's speed in the same loop) instead of in 24 registers.
typedef int32_t Acc __attribute__((vector_size(64)));

inline __attribute__((always_inline)) Acc dpbusd(Acc acc, __m512i a, __m512i b) {
  return Acc(_mm512_dpbusd_epi32(__m512i(acc), a, b));
}

// Accumulators from the tile's start values (or zero), its partial rows and D requested.
template <int MR>
[[gnu::always_inline]] inline void start_s8(Acc (&acc)[MR][2], const GemmTile& t, const ColumnMasks& mask) {
  __m512i init[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  if (t.start)
    for (int h = 0; h < 2; ++h) init[h] = _mm512_maskz_loadu_epi32(mask[h], t.start + 16 * h);
  const int32_t* partial = reinterpret_cast<const int32_t*>(t.partial);
  // Both ends unrolled so the accumulators stay in registers (gemm_tile_avx512.h, finish_tile).
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    acc[i][0] = Acc(init[0]);
    acc[i][1] = Acc(init[1]);
    if (!t.first) {
      _mm_prefetch(reinterpret_cast<const char*>(partial + i * t.ldp), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(partial + i * t.ldp + 16), _MM_HINT_T0);
    }
    if (t.last) prefetch_output_row(*t.last, i);
  }
}

// One K quad: row i's A quad (broadcast) times B's two 16-column halves.
template <int MR>
[[gnu::always_inline]] inline void dot_quad(Acc (&acc)[MR][2], const int32_t* a, __m512i b0, __m512i b1) {
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    const __m512i ai = _mm512_set1_epi32(a[i]);
    acc[i][0] = dpbusd(acc[i][0], ai, b0);
    acc[i][1] = dpbusd(acc[i][1], ai, b1);
  }
}

template <int MR>
[[gnu::always_inline]] inline void finish_s8(const Acc (&acc)[MR][2], const GemmTile& t, const ColumnMasks& mask) {
  // The short end (gemm_tile_avx512.h, ends_with_alpha_only): D = acc, fields read once.
  if (ends_with_sums_only(t)) {
    int32_t* d = static_cast<int32_t*>(t.last->d);
    const int64_t ldd = t.last->ldd;
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) _mm512_mask_storeu_epi32(d + i * ldd + 16 * h, mask[h], __m512i(acc[i][h]));
    return;
  }
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) finish_vector_s32(__m512i(acc[i][h]), i, h, t, mask);
}

template <int MR>
struct TileS8 {
  static void run(const GemmTile& t) {
    const ColumnMasks mask(t.n);
    Acc acc[MR][2];
    start_s8<MR>(acc, t, mask);
    const int32_t* a = static_cast<const int32_t*>(t.a);  // one u8 quad per int32
    const int8_t* b = static_cast<const int8_t*>(t.b);     // 32 columns x 4 per quad
    SideWalk side(t);
    for (int64_t p = 0; p < t.k_steps; ++p) {
      prefetch_b_step(b, t.prefetch_b);
      side.step();
      dot_quad<MR>(acc, a, _mm512_loadu_si512(b), _mm512_loadu_si512(b + 64));
      a += kGemmMR;
      b += 4 * kGemmNR;
    }
    finish_s8<MR>(acc, t, mask);
  }
};

// Two tiles of the same rows, A and K over two packed panels, stepped together (decode: two
// streams of B; kernels/gemm.h, gemm_tile_bf16_pair_*). Integer sums: the same results as
// two TileS8 calls in any order. No side stream.
template <int MR>
struct TileS8Pair {
  static void run(const GemmTile& t0, const GemmTile& t1) {
    const ColumnMasks mask0(t0.n), mask1(t1.n);
    Acc acc0[MR][2], acc1[MR][2];
    start_s8<MR>(acc0, t0, mask0);
    start_s8<MR>(acc1, t1, mask1);
    const int32_t* a = static_cast<const int32_t*>(t0.a);
    const int8_t* b0 = static_cast<const int8_t*>(t0.b);
    const int8_t* b1 = static_cast<const int8_t*>(t1.b);
    for (int64_t p = 0; p < t0.k_steps; ++p) {
      prefetch_b_step(b0, t0.prefetch_b);
      prefetch_b_step(b1, t1.prefetch_b);
      dot_quad<MR>(acc0, a, _mm512_loadu_si512(b0), _mm512_loadu_si512(b0 + 64));
      dot_quad<MR>(acc1, a, _mm512_loadu_si512(b1), _mm512_loadu_si512(b1 + 64));
      a += kGemmMR;
      b0 += 4 * kGemmNR;
      b1 += 4 * kGemmNR;
    }
    finish_s8<MR>(acc0, t0, mask0);
    finish_s8<MR>(acc1, t1, mask1);
  }
};

}  // namespace

void gemm_tile_s8_avx512(const GemmTile& t) {
  dispatch_rows<TileS8>(t, std::make_integer_sequence<int, kGemmMR>{});
}

void gemm_tile_s8_pair_avx512(const GemmTile& t0, const GemmTile& t1) {
  dispatch_pair_rows<TileS8Pair>(t0, t1, std::make_integer_sequence<int, kGemmPairMaxRows>{});
}

}  // namespace sol::kernels
