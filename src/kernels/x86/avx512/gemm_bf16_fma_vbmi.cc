// The bf16 GEMM tile as f32 FMAs with fp8 B widened by VBMI byte tables: the FMA variant on a
// core that also has VBMI (gemm_bf16_tiles_avx512.h, DotFma).
#include "kernels/x86/avx512/gemm_bf16_tiles_avx512.h"

namespace sol::kernels {

void gemm_tile_bf16_fma_vbmi(const GemmTile& t) { gemm_tile_bf16_any<DotFma>(t); }
void gemm_tile_bf16_pair_fma_vbmi(const GemmTile& t0, const GemmTile& t1) { gemm_tile_bf16_pair_any<DotFma>(t0, t1); }

}  // namespace sol::kernels
