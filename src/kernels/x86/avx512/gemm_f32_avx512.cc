// f32 GEMM micro-kernel: a 12 x 32 tile in 24 zmm accumulators, one vfmadd231ps per
// (row, 16 columns, k). Each K step loads the B row of the panel (2 vectors, L1-resident across
// the A panels of a block) and broadcasts 12 A values.
#include "kernels/x86/avx512/gemm_tile_avx512.h"

namespace sol::kernels {
namespace {

template <int MR>
struct TileF32 {
  static void run(const GemmTile& t) {
    const ColumnMasks mask(t.n);
    __m512 acc[MR][2];
    start_tile<MR>(acc, t);
    const float* a = static_cast<const float*>(t.a);
    const float* b = static_cast<const float*>(t.b);
    SideWalk side(t);
    for (int64_t p = 0; p < t.k_steps; ++p) {
      prefetch_b_step(b, t.prefetch_b);
      side.step();
      const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        const __m512 ai = _mm512_set1_ps(a[i]);
        acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
        acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
      }
      a += kGemmMR;
      b += kGemmNR;
    }
    finish_tile<MR>(acc, t, mask);
  }
};

}  // namespace

void gemm_tile_f32_avx512(const GemmTile& t) {
  dispatch_rows<TileF32>(t, std::make_integer_sequence<int, kGemmMR>{});
}

}  // namespace sol::kernels
