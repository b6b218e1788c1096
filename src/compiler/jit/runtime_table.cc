// The table of micro-kernels a generated kernel calls (sol_rt::Runtime), and the build-time
// proof that the runtime header's GemmTile is kernels::GemmTile, field for field.
#include <cstddef>

#include "compiler/jit/jit.h"
#include "compiler/runtime/sol_tile_runtime.h"
#include "kernels/gemm.h"

namespace sol::tile {

namespace {
using K = kernels::GemmTile;
using R = sol_rt::GemmTile;
#define SOL_SAME_FIELD(f) \
  static_assert(offsetof(K, f) == offsetof(R, f) && sizeof(K::f) == sizeof(R::f), "GemmTile." #f " differs")
SOL_SAME_FIELD(m);
SOL_SAME_FIELD(n);
SOL_SAME_FIELD(k_steps);
SOL_SAME_FIELD(a);
SOL_SAME_FIELD(b);
SOL_SAME_FIELD(partial);
SOL_SAME_FIELD(ldp);
SOL_SAME_FIELD(first);
SOL_SAME_FIELD(last);
SOL_SAME_FIELD(sa);
SOL_SAME_FIELD(lds_a);
SOL_SAME_FIELD(sb);
SOL_SAME_FIELD(start);
SOL_SAME_FIELD(prefetch_b);
SOL_SAME_FIELD(b_fp8);
SOL_SAME_FIELD(b_widened);
SOL_SAME_FIELD(side);
SOL_SAME_FIELD(side_rows);
SOL_SAME_FIELD(side_row_stride);
SOL_SAME_FIELD(side_lines);
SOL_SAME_FIELD(side_l2);
#undef SOL_SAME_FIELD
static_assert(sizeof(K) == sizeof(R));
static_assert(sol_rt::kPanelRows == kernels::kGemmMR && sol_rt::kPanelCols == kernels::kGemmNR);

// Generated code calls the AVX-512 tile kernels (it is built for the host with AVX-512): the
// GEMM table's entry for that level, looked up once.
const kernels::GemmKernels& avx512_tiles() {
  static const kernels::GemmKernels& k = *best_entry(kernels::gemm_kernel_table(), Backend::cpu, Isa::avx512)->set;
  return k;
}
void call_f32(const R& t) { avx512_tiles().tile_f32(reinterpret_cast<const K&>(t)); }
void call_bf16(const R& t) { avx512_tiles().tile_bf16(reinterpret_cast<const K&>(t)); }
}  // namespace

const sol_rt::Runtime& runtime_table() {
  static const sol_rt::Runtime rt = [] {
    sol_rt::Runtime r;
    r.gemm_tile_f32 = call_f32;
    r.gemm_tile_bf16 = call_bf16;
    return r;
  }();
  return rt;
}

}  // namespace sol::tile
