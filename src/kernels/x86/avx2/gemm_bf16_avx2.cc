// bf16 GEMM micro-kernels for AVX2 + FMA. AVX2 has no bf16 dot product, so each (k, k+1) pair
// is multiplied as f32: two FMAs per pair, even then odd, into one accumulator. B's pairs are
// widened in registers (a bf16 is the top half of its f32: even element by a shift, odd by a
// mask). A comes either as bf16 pairs, widened in registers the same way (sub-tiles of 4 rows x
// 16 columns: 8 accumulators, 4 widened B vectors, 2 widened A values), or widened once when
// packed (the set's pack_a_panel_f32_pairs; kernels/gemm.h): then each A value is a broadcast
// from memory, and the registers the A widening took hold 6 rows (12 accumulators) instead of
// 4. Both give the same bits.
#include "kernels/convert.h"
#include "kernels/x86/avx2/gemm_tile_avx2.h"

namespace sol::kernels {
namespace {

// Where a tile's A panel keeps its K steps: bf16 pairs of kGemmMR rows, one 32-bit word a row
// a step; or (kWidened) the tile's m rows as f32 pairs, 2 m words a step, the first values of
// the step's pairs then the second ones.
template <bool kWidened>
struct PanelA {
  static constexpr int kRows = kWidened ? 6 : 4;  // rows of a sub-tile
  static int64_t step_words(const GemmTile& t) { return kWidened ? 2 * t.m : kGemmMR; }
};

// acc[i][*] += the products of K steps [0, steps) of rows i0.. and columns col0..col0+15.
// a: the sub-tile's first row of A at the first step (step_words apart, the second values of
// a widened step m words on), b: a bf16 B panel at the first step.
template <int R, bool kWidened>
[[gnu::always_inline]] inline void sum_steps(AccF32 (&acc)[R][2], const uint32_t* a, int64_t step_words, int m,
                                             const uint32_t* b, int64_t steps, int64_t ahead, SideWalk& side) {
  const __m256i odd = _mm256_set1_epi32(int(0xFFFF0000u));
  const auto even_f32 = [](__m256i w) { return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)); };
  const auto odd_f32 = [&](__m256i w) { return _mm256_castsi256_ps(_mm256_and_si256(w, odd)); };
  // A widened step's second values, as a pointer of its own: GCC otherwise keeps one index
  // register per row for them and spills its loop variables.
  const float* a_second = reinterpret_cast<const float*>(a) + m;
  for (int64_t p = 0; p < steps; ++p) {
    side.step();
    if (ahead) prefetch_b_step(b, ahead);
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 8));
    if constexpr (kWidened) {
      // Every row's first products, then every row's second: each accumulator still takes its
      // step's pair in order, and only two widened B vectors are live at a time.
      // acc[i] += values[i] * (b0, b1) for the R rows.
      const auto products = [&](const float* values, __m256 b0, __m256 b1) __attribute__((always_inline)) {
#pragma GCC unroll 6
        for (int i = 0; i < R; ++i) {
          const __m256 x = _mm256_broadcast_ss(values + i);
          acc[i][0] = AccF32(_mm256_fmadd_ps(x, b0, __m256(acc[i][0])));
          acc[i][1] = AccF32(_mm256_fmadd_ps(x, b1, __m256(acc[i][1])));
        }
      };
      products(reinterpret_cast<const float*>(a), even_f32(w0), even_f32(w1));
      products(a_second, odd_f32(w0), odd_f32(w1));
    } else {
      const __m256 b0e = even_f32(w0), b0o = odd_f32(w0), b1e = even_f32(w1), b1o = odd_f32(w1);
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const __m256i ai = _mm256_set1_epi32(int(a[i]));
        const __m256 ae = even_f32(ai), ao = odd_f32(ai);
        acc[i][0] = AccF32(_mm256_fmadd_ps(ao, b0o, _mm256_fmadd_ps(ae, b0e, __m256(acc[i][0]))));
        acc[i][1] = AccF32(_mm256_fmadd_ps(ao, b1o, _mm256_fmadd_ps(ae, b1e, __m256(acc[i][1]))));
      }
    }
    a += step_words;
    if constexpr (kWidened) a_second += step_words;
    b += kGemmNR;
  }
}

template <bool kWidened>
struct SubBf16 {
  template <int R>
  struct Rows {
    static void run(const GemmTile& t, int i0, int col0, bool lead, const Chunk& c, SideWalk& side);
  };
};

template <bool kWidened>
template <int R>
void SubBf16<kWidened>::Rows<R>::run(const GemmTile& t, int i0, int col0, bool lead, const Chunk& c, SideWalk& side) {
  AccF32 acc[R][2];
  load_sums<R>(acc, c, i0, col0);
  if (c.last) request_rows<R>(t, i0, col0);
  SideWalk walk = lead ? side : SideWalk(t, false);  // local: see gemm_f32_avx2.cc
  // The lead sub-tile (col0 = 0) requests both lines of each step; the others read what it
  // brought in.
  const int64_t step_words = PanelA<kWidened>::step_words(t);
  sum_steps<R, kWidened>(acc, static_cast<const uint32_t*>(t.a) + c.k0 * step_words + i0, step_words, t.m,
                         static_cast<const uint32_t*>(t.b) + c.k0 * kGemmNR + col0, c.k1 - c.k0,
                         lead ? t.prefetch_b : 0, walk);
  if (lead) side = walk;
  if (c.last) finish_sub<R>(acc, t, i0, col0);
  else store_sums<R>(acc, c, i0, col0);
}

// fp8 block scales: every 128-wide K group (64 steps) is summed from zero per sub-tile, scaled
// per row and added into the tile's running totals (an L1 array), as the AVX-512 kernel does.
// A packed fp8 B (t.b_fp8) is widened a group at a time into a bf16 buffer (and, with
// t.b_widened, also kept there for a second tile over the same columns).
template <bool kWidened>
struct SubBf16Group {
  template <int R>
  struct Rows {
    // totals[i][c] of rows i0.., columns col0..: += sums of this group * scale(row, g).
    static void run(const GemmTile& t, int i0, int col0, const uint32_t* a, const uint32_t* b, int64_t g,
                    float (*totals)[kGemmNR], SideWalk& side);
  };
};

template <bool kWidened>
template <int R>
void SubBf16Group<kWidened>::Rows<R>::run(const GemmTile& t, int i0, int col0, const uint32_t* a, const uint32_t* b,
                                          int64_t g, float (*totals)[kGemmNR], SideWalk& side) {
  AccF32 acc[R][2];
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) acc[i][0] = acc[i][1] = AccF32(_mm256_setzero_ps());
  sum_steps<R, kWidened>(acc, a + i0, PanelA<kWidened>::step_words(t), t.m, b + col0, kScaleGroupSteps, 0, side);
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    const int row = i0 + i;
    const __m256 s = _mm256_set1_ps((t.sa ? t.sa[row * t.lds_a + g] : 1.0f) * t.sb[g]);
#pragma GCC unroll 6
    for (int h = 0; h < 2; ++h) {
      float* total = &totals[row][col0 + 8 * h];
      const __m256 v = g == 0 ? _mm256_mul_ps(__m256(acc[i][h]), s) : _mm256_fmadd_ps(__m256(acc[i][h]), s, _mm256_loadu_ps(total));
      _mm256_storeu_ps(total, v);
    }
  }
}

template <bool kWidened, int... Rs>
void run_scaled(const GemmTile& t, std::integer_sequence<int, Rs...>) {
  using Fn = void (*)(const GemmTile&, int, int, const uint32_t*, const uint32_t*, int64_t, float (*)[kGemmNR],
                      SideWalk&);
  static constexpr Fn table[] = {&SubBf16Group<kWidened>::template Rows<Rs + 1>::run...};
  constexpr int kRows = PanelA<kWidened>::kRows;
  alignas(32) float totals[kGemmMR][kGemmNR] = {};
  alignas(32) uint16_t widened[kScaleGroupSteps * kGemmNR * 2];
  const int64_t groups = t.k_steps / kScaleGroupSteps;
  SideWalk side(t, true);
  SideWalk none(t, false);
  for (int64_t g = 0; g < groups; ++g) {
    const uint32_t* a = static_cast<const uint32_t*>(t.a) + g * kScaleGroupSteps * PanelA<kWidened>::step_words(t);
    const uint32_t* b;
    if (t.b_fp8) {
      // 64 steps of 32 columns x 2 e4m3 bytes, in the bf16 pair order.
      constexpr int64_t kGroupBytes = kScaleGroupSteps * kGemmNR * 2;
      const uint8_t* src = static_cast<const uint8_t*>(t.b) + g * kGroupBytes;
      uint16_t* dst = t.b_widened ? static_cast<uint16_t*>(t.b_widened) + g * kGroupBytes : widened;
      convert_avx2(src, DType::f8e4m3, dst, DType::bf16, kGroupBytes, false, 0);
      b = reinterpret_cast<const uint32_t*>(dst);
    } else {
      b = static_cast<const uint32_t*>(t.b) + g * kScaleGroupSteps * kGemmNR;
    }
    bool lead = true;
    const int rows = balanced_rows(t.m, kRows);
    for (int col0 = 0; col0 < t.n; col0 += kHalfCols)
      for (int i0 = 0; i0 < t.m; i0 += rows) {
        table[(t.m - i0 < rows ? t.m - i0 : rows) - 1](t, i0, col0, a, b, g, totals, lead ? side : none);
        lead = false;
      }
  }
  for (int i = 0; i < t.m; ++i) {
    if (!t.first) _mm_prefetch(reinterpret_cast<const char*>(t.partial + i * t.ldp), _MM_HINT_T0);
    for (int v = 0; v < kGemmNR / 8; ++v)
      finish8(_mm256_load_ps(&totals[i][8 * v]), i, 8 * v, vector_cols(t.n, v), t);
  }
}

template <bool kWidened>
void run_tile(const GemmTile& t) {
  constexpr int kRows = PanelA<kWidened>::kRows;
  if (t.sb) {
    run_scaled<kWidened>(t, std::make_integer_sequence<int, kRows>{});
  } else {
    run_subtiles<SubBf16<kWidened>::template Rows, kRows>(t, std::make_integer_sequence<int, kRows>{});
  }
}

}  // namespace

void gemm_tile_bf16_avx2(const GemmTile& t) { run_tile<false>(t); }
void gemm_tile_bf16_fma_avx2(const GemmTile& t) { run_tile<true>(t); }

}  // namespace sol::kernels
