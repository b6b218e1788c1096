// bf16 GEMM micro-kernel: a 12 x 32 tile in 24 zmm f32 accumulators; each vdpbf16ps adds the
// products of one (k, k+1) pair of A (broadcast as 32 bits) with the same pair of 16 columns of
// B. 24 independent accumulators cover the instruction's ~6-cycle latency on both pipes.
#include "kernels/x86/avx512/gemm_tile_avx512.h"

namespace sol::kernels {
namespace {

template <int MR>
struct TileBf16 {
  static void run(const GemmTile& t) {
    const ColumnMasks mask(t.n);
    __m512 acc[MR][2];
    start_tile<MR>(acc, t);
    const int32_t* a = static_cast<const int32_t*>(t.a);    // one (k, k+1) pair per int32
    const uint16_t* b = static_cast<const uint16_t*>(t.b);  // 32 columns x 2 per pair
    for (int64_t p = 0; p < t.k_steps; ++p) {
      const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
      const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 32);
#pragma GCC unroll 12
      for (int i = 0; i < MR; ++i) {
        const __m512bh ai = (__m512bh)_mm512_set1_epi32(a[i]);
        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
      }
      a += kGemmMR;
      b += 2 * kGemmNR;
    }
    finish_tile<MR>(acc, t, mask);
  }
};

}  // namespace

void gemm_tile_bf16_avx512(const GemmTile& t) {
  dispatch_rows<TileBf16>(t, std::make_integer_sequence<int, kGemmMR>{});
}

}  // namespace sol::kernels
