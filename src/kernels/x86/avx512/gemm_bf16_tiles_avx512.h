#pragma once
// bf16 GEMM micro-kernel: a 12 x 32 tile in 24 zmm f32 accumulators; each vdpbf16ps adds the
// products of one (k, k+1) pair of A (broadcast as 32 bits) with the same pair of 16 columns of
// B. 24 independent accumulators cover the instruction's ~6-cycle latency on both pipes.
// Compiled twice: gemm_bf16_avx512.cc (the avx512 level) and gemm_bf16_vbmi.cc (its variant
// for CPUs with VBMI, whose fp8 B is widened by byte tables, e4m3x64_avx512.h): the same code
// and the same bits, only the widening's instructions differ.
#include "kernels/x86/avx512/e4m3x64_avx512.h"  // first: see its include of e4m3_avx512.h
#include "kernels/x86/avx512/gemm_tile_avx512.h"

namespace sol::kernels {
namespace {

// One K pair of the tile: row i's A pair (broadcast) times B's two 16-column halves, into
// acc[i][0] and acc[i][1].
template <int MR>
[[gnu::always_inline]] inline void dot_pair(__m512 (&acc)[MR][2], const int32_t* a, __m512bh b0, __m512bh b1) {
#pragma GCC unroll 12
  for (int i = 0; i < MR; ++i) {
    const __m512bh ai = (__m512bh)_mm512_set1_epi32(a[i]);
    acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
    acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
  }
}

template <int MR>
struct TileBf16 {
  static void run(const GemmTile& t) {
    const ColumnMasks mask(t.n);
    __m512 acc[MR][2];
    start_tile<MR>(acc, t);
    const int32_t* a = static_cast<const int32_t*>(t.a);    // one (k, k+1) pair per int32
    const uint16_t* b = static_cast<const uint16_t*>(t.b);  // 32 columns x 2 per pair
    SideWalk side(t);
    for (int64_t p = 0; p < t.k_steps; ++p) {
      prefetch_b_step(b, t.prefetch_b);
      side.step();
      const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
      const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 32);
      dot_pair<MR>(acc, a, b0, b1);
      a += kGemmMR;
      b += 2 * kGemmNR;
    }
    finish_tile<MR>(acc, t, mask);
  }
};

// Scale group g's sums of tile t into its running totals: total (+)= acc * sa[i][g] * sb[g].
template <int MR>
[[gnu::always_inline]] inline void promote_group(const __m512 (&acc)[MR][2], __m512 (&total)[MR][2], const GemmTile& t,
                                                 int64_t g) {
  for (int i = 0; i < MR; ++i) {
    const float scale = (t.sa ? t.sa[i * t.lds_a + g] : 1.0f) * t.sb[g];
    const __m512 s = _mm512_set1_ps(scale);
    for (int h = 0; h < 2; ++h)
      total[i][h] = g == 0 ? _mm512_mul_ps(acc[i][h], s) : _mm512_fmadd_ps(acc[i][h], s, total[i][h]);
  }
}

// The totals as the tile's sums for its end (zero when K held no whole group).
template <int MR>
[[gnu::always_inline]] inline void take_totals(__m512 (&acc)[MR][2], const __m512 (&total)[MR][2], int64_t groups) {
  for (int i = 0; i < MR; ++i)
    for (int h = 0; h < 2; ++h) acc[i][h] = groups > 0 ? total[i][h] : _mm512_setzero_ps();
}

// fp8 block scales: every 128-wide K group is summed from zero in the 24 accumulators, then
// scaled per row and added into running totals. The totals live in an L1-resident array: 24
// loads, FMAs and stores per group against 64 x 24 vdpbf16ps (~3%), where keeping them in
// registers would halve the tile and expose the instruction's latency.
// kFp8B: B is a packed fp8 panel widened here; kKeep: and the widened panel is written to
// t.b_widened as a bf16 panel (two stores a step), which the second 8-row tile of a 16-row
// decode reads instead of widening the same panel again.
template <int MR, bool kFp8B, bool kKeep = false>
struct TileBf16ScaledOf {
  static void run(const GemmTile& t) {
    const ColumnMasks mask(t.n);
    __m512 acc[MR][2];
    start_tile<MR>(acc, t);
    alignas(64) __m512 total[MR][2];
    const int32_t* a = static_cast<const int32_t*>(t.a);
    const char* b = static_cast<const char*>(t.b);
    char* keep = static_cast<char*>(t.b_widened);
    const int64_t groups = t.k_steps / kScaleGroupSteps;
    SideWalk side(t);
    for (int64_t g = 0; g < groups; ++g) {
      for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
      for (int64_t p = 0; p < kScaleGroupSteps; ++p) {
        __m512bh b0, b1;
        side.step();
        if constexpr (kFp8B) {
          if (t.prefetch_b) _mm_prefetch(b + t.prefetch_b, _MM_HINT_T0);  // one line per step
          __m512i wide[2];
          e4m3x64_to_bf16(_mm512_loadu_si512(b), wide);
          b0 = (__m512bh)wide[0];
          b1 = (__m512bh)wide[1];
          b += 2 * kGemmNR;
          if constexpr (kKeep) {
            _mm512_storeu_si512(keep, (__m512i)b0);
            _mm512_storeu_si512(keep + 64, (__m512i)b1);
            keep += 4 * kGemmNR;
          }
        } else {
          b0 = (__m512bh)_mm512_loadu_si512(b);
          b1 = (__m512bh)_mm512_loadu_si512(b + 64);
          b += 4 * kGemmNR;
        }
        dot_pair<MR>(acc, a, b0, b1);
        a += kGemmMR;
      }
      promote_group<MR>(acc, total, t, g);
    }
    take_totals<MR>(acc, total, groups);
    finish_tile<MR>(acc, t, mask);
  }
};

template <int MR>
using TileBf16Scaled = TileBf16ScaledOf<MR, false>;
template <int MR>
using TileBf16ScaledFp8B = TileBf16ScaledOf<MR, true>;
template <int MR>
using TileBf16ScaledFp8BKeep = TileBf16ScaledOf<MR, true, true>;

// Two tiles of the same rows, A and K over two packed B panels, stepped together: decode
// (M <= kGemmPairMaxRows) then reads two streams of B instead of one, and each step has twice
// the independent accumulators. Each tile's sums see exactly the operations TileBf16 (bf16
// panels) or TileBf16ScaledOf (fp8 panels with their scales) give them, in the same order, so
// the pair and two single calls agree bit for bit. Neither tile may carry a side stream or keep
// a widened panel (the driver pairs only tiles that don't).
template <int MR>
struct TileBf16PairOf {
  static void run(const GemmTile& t0, const GemmTile& t1) {
    const ColumnMasks mask0(t0.n), mask1(t1.n);
    __m512 acc0[MR][2], acc1[MR][2];
    start_tile<MR>(acc0, t0);
    start_tile<MR>(acc1, t1);
    const int32_t* a = static_cast<const int32_t*>(t0.a);
    const char* b0 = static_cast<const char*>(t0.b);
    const char* b1 = static_cast<const char*>(t1.b);
    if (!t0.b_fp8) {
      for (int64_t p = 0; p < t0.k_steps; ++p) {
        prefetch_b_step(b0, t0.prefetch_b);
        prefetch_b_step(b1, t1.prefetch_b);
        dot_pair<MR>(acc0, a, (__m512bh)_mm512_loadu_si512(b0), (__m512bh)_mm512_loadu_si512(b0 + 64));
        dot_pair<MR>(acc1, a, (__m512bh)_mm512_loadu_si512(b1), (__m512bh)_mm512_loadu_si512(b1 + 64));
        a += kGemmMR;
        b0 += 4 * kGemmNR;
        b1 += 4 * kGemmNR;
      }
    } else {
      alignas(64) __m512 total0[MR][2], total1[MR][2];
      const int64_t groups = t0.k_steps / kScaleGroupSteps;
      for (int64_t g = 0; g < groups; ++g) {
        for (int i = 0; i < MR; ++i) acc0[i][0] = acc0[i][1] = acc1[i][0] = acc1[i][1] = _mm512_setzero_ps();
        for (int64_t p = 0; p < kScaleGroupSteps; ++p) {
          if (t0.prefetch_b) _mm_prefetch(b0 + t0.prefetch_b, _MM_HINT_T0);
          if (t1.prefetch_b) _mm_prefetch(b1 + t1.prefetch_b, _MM_HINT_T0);
          __m512i w0[2], w1[2];
          e4m3x64_to_bf16(_mm512_loadu_si512(b0), w0);
          e4m3x64_to_bf16(_mm512_loadu_si512(b1), w1);
          dot_pair<MR>(acc0, a, (__m512bh)w0[0], (__m512bh)w0[1]);
          dot_pair<MR>(acc1, a, (__m512bh)w1[0], (__m512bh)w1[1]);
          a += kGemmMR;
          b0 += 2 * kGemmNR;
          b1 += 2 * kGemmNR;
        }
        promote_group<MR>(acc0, total0, t0, g);
        promote_group<MR>(acc1, total1, t1, g);
      }
      take_totals<MR>(acc0, total0, groups);
      take_totals<MR>(acc1, total1, groups);
    }
    finish_tile<MR>(acc0, t0, mask0);
    finish_tile<MR>(acc1, t1, mask1);
  }
};

inline void gemm_tile_bf16_pair_any(const GemmTile& t0, const GemmTile& t1) {
  dispatch_pair_rows<TileBf16PairOf>(t0, t1, std::make_integer_sequence<int, kGemmPairMaxRows>{});
}

inline void gemm_tile_bf16_any(const GemmTile& t) {
  if (t.sb && t.b_fp8 && t.b_widened)
    dispatch_rows<TileBf16ScaledFp8BKeep>(t, std::make_integer_sequence<int, kGemmMR>{});
  else if (t.sb && t.b_fp8) dispatch_rows<TileBf16ScaledFp8B>(t, std::make_integer_sequence<int, kGemmMR>{});
  else if (t.sb) dispatch_rows<TileBf16Scaled>(t, std::make_integer_sequence<int, kGemmMR>{});
  else dispatch_rows<TileBf16>(t, std::make_integer_sequence<int, kGemmMR>{});
}

}  // namespace
}  // namespace sol::kernels
