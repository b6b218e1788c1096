#pragma once
// bf16 GEMM micro-kernel: a 12 x 32 tile in 24 zmm f32 accumulators over packed bf16 (or fp8)
// B panels. How one K pair (k, k+1) of A meets B is the Dot policy:
//   DotBf16: one vdpbf16ps per 16 columns with A's pair broadcast as 32 bits; 24 independent
//     accumulators cover the instruction's ~6-cycle latency on both pipes.
//   DotFma: B's pair widened to two f32 vectors in registers (a bf16 is the top half of its
//     f32), A packed as f32 pairs (the tile's MR first values, then MR second ones), two FMAs
//     per pair: the product of two bf16 is exact in f32, so this is the same sum in another
//     rounding order. For cores whose FMA pipes outrun the dot product (docs/perf/gemm.md).
// Compiled per policy and per widening: gemm_bf16{,_fma}_avx512.cc (fp8 B widened by word
// tables) and gemm_bf16{,_fma}_vbmi.cc (by byte tables, e4m3x64_avx512.h); the widening does
// not change bits, the policy does.
#include "kernels/x86/avx512/e4m3x64_avx512.h"  // first: see its include of e4m3_avx512.h
#include "kernels/x86/avx512/gemm_tile_avx512.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {
namespace {

struct DotBf16 {
  // 32-bit words of packed A per K pair, for a tile of MR rows: the panel keeps kGemmMR.
  template <int MR>
  static constexpr int64_t a_words = kGemmMR;
  // Row i's A pair (broadcast) times B's two 16-column halves (bf16 pairs), into acc[i][0..1].
  template <int MR>
  [[gnu::always_inline]] static void pair(__m512 (&acc)[MR][2], const uint32_t* a, __m512i b0, __m512i b1) {
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(int(a[i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, (__m512bh)b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, (__m512bh)b1);
    }
  }
};

struct DotFma {
  // A panel of MR rows: MR first values, then MR second ones (kernels/gemm.h).
  template <int MR>
  static constexpr int64_t a_words = 2 * MR;
  // The same products as f32 FMAs, first values of the pair, then second, into one accumulator.
  template <int MR>
  [[gnu::always_inline]] static void pair(__m512 (&acc)[MR][2], const uint32_t* a, __m512i b0, __m512i b1) {
    const __m512 first[2] = {bf16_low_f32(b0), bf16_low_f32(b1)};
    const __m512 second[2] = {bf16_high_f32(b0), bf16_high_f32(b1)};
    const float* af = reinterpret_cast<const float*>(a);
#pragma GCC unroll 12
    for (int i = 0; i < MR; ++i) {
      const __m512 a0 = _mm512_set1_ps(af[i]), a1 = _mm512_set1_ps(af[MR + i]);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) acc[i][h] = _mm512_fmadd_ps(a1, second[h], _mm512_fmadd_ps(a0, first[h], acc[i][h]));
    }
  }
};

template <class Dot, int MR>
struct TileBf16Of {
  static void run(const GemmTile& t) {
    const ColumnMasks mask(t.n);
    __m512 acc[MR][2];
    start_tile<MR>(acc, t);
    const uint32_t* a = static_cast<const uint32_t*>(t.a);
    const uint16_t* b = static_cast<const uint16_t*>(t.b);  // 32 columns x 2 per pair
    SideWalk side(t);
    for (int64_t p = 0; p < t.k_steps; ++p) {
      prefetch_b_step(b, t.prefetch_b);
      side.step();
      Dot::template pair<MR>(acc, a, _mm512_loadu_si512(b), _mm512_loadu_si512(b + 32));
      a += Dot::template a_words<MR>;
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
template <class Dot, int MR, bool kFp8B, bool kKeep = false>
struct TileBf16ScaledOf {
  static void run(const GemmTile& t) {
    const ColumnMasks mask(t.n);
    __m512 acc[MR][2];
    start_tile<MR>(acc, t);
    alignas(64) __m512 total[MR][2];
    const uint32_t* a = static_cast<const uint32_t*>(t.a);
    const char* b = static_cast<const char*>(t.b);
    char* keep = static_cast<char*>(t.b_widened);
    const int64_t groups = t.k_steps / kScaleGroupSteps;
    SideWalk side(t);
    for (int64_t g = 0; g < groups; ++g) {
      for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
      for (int64_t p = 0; p < kScaleGroupSteps; ++p) {
        __m512i b0, b1;
        side.step();
        if constexpr (kFp8B) {
          if (t.prefetch_b) _mm_prefetch(b + t.prefetch_b, _MM_HINT_T0);  // one line per step
          __m512i wide[2];
          e4m3x64_to_bf16(_mm512_loadu_si512(b), wide);
          b0 = wide[0];
          b1 = wide[1];
          b += 2 * kGemmNR;
          if constexpr (kKeep) {
            _mm512_storeu_si512(keep, b0);
            _mm512_storeu_si512(keep + 64, b1);
            keep += 4 * kGemmNR;
          }
        } else {
          b0 = _mm512_loadu_si512(b);
          b1 = _mm512_loadu_si512(b + 64);
          b += 4 * kGemmNR;
        }
        Dot::template pair<MR>(acc, a, b0, b1);
        a += Dot::template a_words<MR>;
      }
      promote_group<MR>(acc, total, t, g);
    }
    take_totals<MR>(acc, total, groups);
    finish_tile<MR>(acc, t, mask);
  }
};

// Two tiles of the same rows, A and K over two packed B panels, stepped together: decode
// (M <= kGemmPairMaxRows) then reads two streams of B instead of one, and each step has twice
// the independent accumulators. Each tile's sums see exactly the operations TileBf16Of (bf16
// panels) or TileBf16ScaledOf (fp8 panels with their scales) give them, in the same order, so
// the pair and two single calls agree bit for bit. Neither tile may carry a side stream or keep
// a widened panel (the driver pairs only tiles that don't).
template <class Dot, int MR>
struct TileBf16PairOf {
  static void run(const GemmTile& t0, const GemmTile& t1) {
    const ColumnMasks mask0(t0.n), mask1(t1.n);
    __m512 acc0[MR][2], acc1[MR][2];
    start_tile<MR>(acc0, t0);
    start_tile<MR>(acc1, t1);
    const uint32_t* a = static_cast<const uint32_t*>(t0.a);
    const char* b0 = static_cast<const char*>(t0.b);
    const char* b1 = static_cast<const char*>(t1.b);
    if (!t0.b_fp8) {
      for (int64_t p = 0; p < t0.k_steps; ++p) {
        prefetch_b_step(b0, t0.prefetch_b);
        prefetch_b_step(b1, t1.prefetch_b);
        Dot::template pair<MR>(acc0, a, _mm512_loadu_si512(b0), _mm512_loadu_si512(b0 + 64));
        Dot::template pair<MR>(acc1, a, _mm512_loadu_si512(b1), _mm512_loadu_si512(b1 + 64));
        a += Dot::template a_words<MR>;
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
          Dot::template pair<MR>(acc0, a, w0[0], w0[1]);
          Dot::template pair<MR>(acc1, a, w1[0], w1[1]);
          a += Dot::template a_words<MR>;
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

// The row-count tables of one policy's kernels.
template <class Dot>
struct Bf16Tiles {
  template <int MR>
  using Plain = TileBf16Of<Dot, MR>;
  template <int MR>
  using Scaled = TileBf16ScaledOf<Dot, MR, false>;
  template <int MR>
  using ScaledFp8B = TileBf16ScaledOf<Dot, MR, true>;
  template <int MR>
  using ScaledFp8BKeep = TileBf16ScaledOf<Dot, MR, true, true>;
  template <int MR>
  using Pair = TileBf16PairOf<Dot, MR>;
};

template <class Dot>
void gemm_tile_bf16_pair_any(const GemmTile& t0, const GemmTile& t1) {
  dispatch_pair_rows<Bf16Tiles<Dot>::template Pair>(t0, t1, std::make_integer_sequence<int, kGemmPairMaxRows>{});
}

template <class Dot>
void gemm_tile_bf16_any(const GemmTile& t) {
  using T = Bf16Tiles<Dot>;
  constexpr auto rows = std::make_integer_sequence<int, kGemmMR>{};
  if (t.sb && t.b_fp8 && t.b_widened) dispatch_rows<T::template ScaledFp8BKeep>(t, rows);
  else if (t.sb && t.b_fp8) dispatch_rows<T::template ScaledFp8B>(t, rows);
  else if (t.sb) dispatch_rows<T::template Scaled>(t, rows);
  else dispatch_rows<T::template Plain>(t, rows);
}

}  // namespace
}  // namespace sol::kernels
