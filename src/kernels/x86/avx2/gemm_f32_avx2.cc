// f32 GEMM micro-kernel for AVX2 + FMA: the 12 x 32 tile as sub-tiles of 6 rows x 16 columns,
// 12 ymm accumulators, two B vectors and one broadcast A (15 of the 16 registers). Per K step
// 12 FMAs (6 cycles on two FMA pipes) for 2 vector loads and 6 broadcasts.
#include "kernels/x86/avx2/gemm_tile_avx2.h"

namespace sol::kernels {
namespace {

constexpr int kRowsF32 = 6;

template <int R>
struct SubF32 {
  static void run(const GemmTile& t, int i0, int col0, bool lead, const Chunk& c, SideWalk& side) {
    AccF32 acc[R][2];
    load_sums<R>(acc, c, i0, col0);
    if (c.last) request_rows<R>(t, i0, col0);
    const float* a = static_cast<const float*>(t.a) + c.k0 * kGemmMR + i0;
    const float* b = static_cast<const float*>(t.b) + c.k0 * kGemmNR + col0;
    const int64_t ahead = lead ? t.prefetch_b : 0;
    // A local copy: stepping the caller's walk through a reference made GCC keep the
    // accumulators in memory (a store per FMA).
    SideWalk walk = lead ? side : SideWalk(t, false);
    const int64_t k1 = c.k1;  // a local bound: through the reference GCC reloads it every step
#pragma GCC unroll 2
    for (int64_t p = c.k0; p < k1; ++p) {
      prefetch_b_step(b, ahead);  // lead: col0 = 0, the step's start
      walk.step();
      const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i) {
        const __m256 ai = _mm256_broadcast_ss(a + i);
        acc[i][0] = AccF32(_mm256_fmadd_ps(ai, b0, __m256(acc[i][0])));
        acc[i][1] = AccF32(_mm256_fmadd_ps(ai, b1, __m256(acc[i][1])));
      }
      a += kGemmMR;
      b += kGemmNR;
    }
    if (lead) side = walk;
    if (c.last) finish_sub<R>(acc, t, i0, col0);
    else store_sums<R>(acc, c, i0, col0);
  }
};

}  // namespace

void gemm_tile_f32_avx2(const GemmTile& t) {
  run_subtiles<SubF32, kRowsF32>(t, std::make_integer_sequence<int, kRowsF32>{});
}

}  // namespace sol::kernels
