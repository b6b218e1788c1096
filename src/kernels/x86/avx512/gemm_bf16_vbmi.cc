// The bf16 GEMM tile of the avx512 level's VBMI variant and of the amx level
// (gemm_bf16_tiles_avx512.h; fp8 B widened by byte tables, half the shuffles of word tables).
#include "kernels/x86/avx512/gemm_bf16_tiles_avx512.h"

namespace sol::kernels {

void gemm_tile_bf16_vbmi(const GemmTile& t) { gemm_tile_bf16_any<DotBf16>(t); }
void gemm_tile_bf16_pair_vbmi(const GemmTile& t0, const GemmTile& t1) { gemm_tile_bf16_pair_any<DotBf16>(t0, t1); }

}  // namespace sol::kernels
