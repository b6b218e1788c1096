// The bf16 GEMM tile as f32 FMAs (gemm_bf16_tiles_avx512.h, DotFma; fp8 B widened by word
// tables): the avx512 level on cores whose FMA pipes outrun their bf16 dot product.
#include "kernels/x86/avx512/gemm_bf16_tiles_avx512.h"

namespace sol::kernels {

void gemm_tile_bf16_fma_avx512(const GemmTile& t) { gemm_tile_bf16_any<DotFma>(t); }
void gemm_tile_bf16_pair_fma_avx512(const GemmTile& t0, const GemmTile& t1) { gemm_tile_bf16_pair_any<DotFma>(t0, t1); }

}  // namespace sol::kernels
