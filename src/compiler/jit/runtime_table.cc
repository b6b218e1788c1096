// The table of micro-kernels a generated kernel calls (sol_rt::Runtime), and the build-time
// proof that the runtime header's GemmTile is kernels::GemmTile, field for field.
#include <cstddef>

#include "compiler/jit/jit.h"
#include "compiler/runtime/sol_tile_runtime.h"
#include "hw/kernel_select.h"
#include "sol/hw.h"
#include "kernels/gemm.h"
#include "sol/error.h"
#include "sol/tile.h"

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

// Generated code calls the GEMM tile kernels of the ISA level in force at launch (its own code
// is built for the host CPU, -march=native, so any level the CPU runs is fine for it). One
// Runtime per level; each wrapper looks its level's set up once. gemm_tile_bf16 reads bf16
// pairs: the level's general set whose bf16 tile does (at avx2 not the level's first set,
// whose tile reads A widened).
template <Isa L>
const kernels::GemmKernels& tiles() {
  static const kernels::GemmKernels& k =
      *best_entry(kernels::gemm_kernel_table(), Backend::cpu, L, kNeedsNothing,
                  [](const kernels::GemmKernels& s) { return s.pack_a_panel_f32_pairs == nullptr; })
           ->set;
  return k;
}
// The set whose bf16 tile reads A widened to f32 (pack_a_panel_f32_pairs): the highest at or
// below level L that this CPU runs, a core trait not required (any CPU of the level runs it);
// null where there is none (scalar).
template <Isa L>
const kernels::GemmKernels* widened_tiles() {
  static const kernels::GemmKernels* k = [] {
    const auto* e = best_entry(kernels::gemm_kernel_table(), Backend::cpu, L, kernel_needs_met() | kKernelTraits,
                               [](const kernels::GemmKernels& s) { return s.pack_a_panel_f32_pairs != nullptr; });
    return e ? e->set : nullptr;
  }();
  return k;
}
template <Isa L>
void call_f32(const R& t) { tiles<L>().tile_f32(reinterpret_cast<const K&>(t)); }
template <Isa L>
void call_bf16_widened(const R& t) { widened_tiles<L>()->tile_bf16(reinterpret_cast<const K&>(t)); }
template <Isa L>
void call_bf16(const R& t) { tiles<L>().tile_bf16(reinterpret_cast<const K&>(t)); }
template <Isa L>
const sol_rt::Runtime& runtime_of() {
  static const sol_rt::Runtime rt = [] {
    sol_rt::Runtime r;
    r.gemm_tile_f32 = call_f32<L>;
    r.gemm_tile_bf16 = call_bf16<L>;
    if (widened_tiles<L>()) r.gemm_tile_bf16_widened = call_bf16_widened<L>;
    return r;
  }();
  return rt;
}
}  // namespace

CpuTarget cpu_target_here() {
  // A widened where sol::gemm's own set at the level in force reads it (avx2, which has no bf16
  // dot product; avx512 on a core that multiplies bf16 faster as f32 FMAs), and at amx where the
  // core has that trait: there sol::gemm runs the matrix unit, and the vector tiles generated
  // code calls are the ones the trait decides.
  const Isa level = active_isa();
  const auto* natural = best_entry(kernels::gemm_kernel_table(), Backend::cpu, level, kernel_needs_met());
  const bool gemm_widens = natural && natural->set->pack_a_panel_f32_pairs != nullptr;
  CpuTarget t;
  t.widen_bf16_a = (gemm_widens || (kernel_needs_met() & kPrefersFmaBf16) != 0) &&
                   runtime_table().gemm_tile_bf16_widened != nullptr;
  return t;
}

const sol_rt::Runtime& runtime_table() {
  // The generated code itself is built for the host CPU (-march=native) whatever SOL_ISA says;
  // a level without tile kernels (scalar) takes the CPU's best level's.
  Isa level = active_isa();
  if (!best_entry(kernels::gemm_kernel_table(), Backend::cpu, level)->set->tile_f32) level = cpu_features().best_isa;
  const kernels::GemmKernels* k = best_entry(kernels::gemm_kernel_table(), Backend::cpu, level)->set;
  check(k->tile_f32 && k->tile_bf16, "tile kernel", "generated kernels call the GEMM tile kernels, which need ",
        "AVX2 + FMA or above; this CPU's best level is ", isa_name(level));
  switch (level) {
    case Isa::avx2: return runtime_of<Isa::avx2>();
    case Isa::avx512: return runtime_of<Isa::avx512>();
    default: return runtime_of<Isa::amx>();
  }
}

}  // namespace sol::tile
