#pragma once
// The bf16 GEMM written in the tile DSL (examples/tile/gemm_bf16.tile is its text form):
// C[M, N] (f32) = A[M, K] (bf16) x B[K, N] (bf16).
#include "sol/tile.h"

namespace sol::tile {
Program dsl_gemm_bf16();
}
