// The avx512 level's bf16 GEMM tile (gemm_bf16_tiles_avx512.h; fp8 B widened by word tables).
#include "kernels/x86/avx512/gemm_bf16_tiles_avx512.h"

namespace sol::kernels {

void gemm_tile_bf16_avx512(const GemmTile& t) { gemm_tile_bf16_any<DotBf16>(t); }
void gemm_tile_bf16_pair_avx512(const GemmTile& t0, const GemmTile& t1) { gemm_tile_bf16_pair_any<DotBf16>(t0, t1); }

}  // namespace sol::kernels
