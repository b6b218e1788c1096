// Every op family's kernel table (core/kernel_table.h): each ISA level this CPU supports
// resolves to a kernel set, the set is the entry with the highest level not above it, forcing
// the level with SOL_ISA selects that set, and the set routes exactly as the ISA predicates the
// ops tested before the tables did (vector kernels from avx512 on, AMX from amx, copies from
// avx2): so each forced level runs the same kernels as before, and the op tests that compare
// the paths bit for bit (test_norm_paths, test_quant_fp8_paths, ...) cover the results.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "hw/kernel_select.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/combine.h"
#include "kernels/engram.h"
#include "kernels/gemm.h"
#include "kernels/move_bytes.h"
#include "kernels/norm.h"
#include "kernels/quant.h"
#include "kernels/rope.h"
#include "kernels/route.h"
#include "kernels/select.h"
#include "kernels/softmax.h"
#include "kernels/weighted_sum.h"
#include "kernels/x86/avx512/mla_chunk_avx512.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/tuning.h"

namespace sol {
namespace {

constexpr Isa kLevels[] = {Isa::scalar, Isa::avx2, Isa::avx512, Isa::amx};

// For every level up to the CPU's best: the chosen entry is the right one, SOL_ISA selects it,
// and `routes(set, level)` holds (the family's predicates).
template <class Set, class Routes>
void check_table(KernelTable<Set> table, const char* family, Routes&& routes) {
  SCOPED_TRACE(family);
  ASSERT_FALSE(table.empty());
  for (const KernelEntry<Set>& e : table) EXPECT_NE(e.set, nullptr);
  for (Isa level : kLevels) {
    if (level > cpu_features().best_isa) continue;
    SCOPED_TRACE(std::string("level ") + std::string(isa_name(level)));
    const KernelEntry<Set>* e = best_entry(table, Backend::cpu, level, kernel_needs_met());
    ASSERT_NE(e, nullptr) << "no kernel set";
    EXPECT_LE(e->isa, level);
    EXPECT_EQ(e->needs & ~kernel_needs_met(), 0u);
    for (const KernelEntry<Set>& other : table) {
      if (other.backend == Backend::cpu && (other.needs & ~kernel_needs_met()) == 0) {
        EXPECT_FALSE(other.isa > e->isa && other.isa <= level) << "a better entry";
      }
    }
    setenv("SOL_ISA", std::string(isa_name(level)).c_str(), 1);
    EXPECT_EQ(&select_kernels(table, family), e->set);
    unsetenv("SOL_ISA");
    routes(*e->set, level);
  }
}

bool vec(Isa level) { return level >= Isa::avx512; }

TEST(KernelTables, NoCudaEntriesYet) {
  EXPECT_EQ(best_entry(kernels::norm_kernel_table(), Backend::cuda, Isa::amx), nullptr);
}

TEST(KernelTables, EveryLevelResolvesAsBefore) {
  check_table(kernels::norm_kernel_table(), "norm", [](const kernels::NormKernels& k, Isa l) {
    EXPECT_TRUE(k.sum_squares && k.sum && k.shifted_sums && k.scale_by_weight && k.add_into && k.layernorm_apply);
    EXPECT_EQ(k.add_sum_squares, vec(l)             ? kernels::add_sum_squares_avx512
                                 : l == Isa::avx2 ? kernels::add_sum_squares_avx2
                                                  : nullptr);
    for (bool present : {!!k.rms_apply, !!k.rms_apply_bf16_amax, !!k.layernorm_apply_f32w,
                         !!k.layernorm_apply_packed, !!k.pack_bf16_pairs, !!k.widen_to_f32})
      EXPECT_EQ(present, vec(l));
    EXPECT_EQ(k.layernorm_apply_bf16w_next, vec(l)             ? kernels::layernorm_apply_bf16w_next_avx512
                                            : l == Isa::avx2 ? kernels::layernorm_apply_bf16w_next_avx2
                                                             : nullptr);
    EXPECT_EQ(k.layernorm_apply_bf16w, vec(l)             ? kernels::layernorm_apply_bf16w_avx512
                                       : l == Isa::avx2 ? kernels::layernorm_apply_bf16w_avx2
                                                        : nullptr);
    EXPECT_EQ(k.rms_apply_bf16w_next, vec(l)             ? kernels::rms_apply_bf16w_next_avx512
                                      : l == Isa::avx2 ? kernels::rms_apply_bf16w_next_avx2
                                                       : nullptr);
    EXPECT_EQ(k.rms_apply_bf16w, vec(l)             ? kernels::rms_apply_bf16w_avx512
                                 : l == Isa::avx2 ? kernels::rms_apply_bf16w_avx2
                                                  : nullptr);
    EXPECT_EQ(!!k.stream_fence, l >= Isa::avx2);
    EXPECT_EQ(k.sum_squares == kernels::sum_squares_avx512, vec(l));
    EXPECT_EQ(k.sum_squares == kernels::sum_squares_avx2, l == Isa::avx2);
    EXPECT_EQ(k.layernorm_apply == kernels::layernorm_apply_avx2, l == Isa::avx2);
  });
  check_table(kernels::quant_kernel_table(), "quant", [](const kernels::QuantKernels& k, Isa l) {
    EXPECT_TRUE(k.abs_max && k.scale_to_f32 && k.dequant_scale && k.from_f32);
    EXPECT_EQ(k.abs_max == kernels::abs_max_avx2, l == Isa::avx2);
    for (bool present : {!!k.quant_row_e4m3, !!k.quant_row_bf16_amax, !!k.block_amax_rows_bf16,
                         !!k.block_amax_finish, !!k.quant_panel_mults_bf16, !!k.even_odd_order,
                         !!k.rms_quant_row_bf16, !!k.dequant_row, !!k.stream_fence})
      EXPECT_EQ(present, vec(l));
    EXPECT_EQ(k.abs_max == kernels::abs_max_avx512, vec(l));
  });
  check_table(kernels::activation_kernel_table(), "activation", [](const kernels::ActivationKernels& k, Isa l) {
    EXPECT_EQ(k.silu_mul, vec(l)             ? kernels::silu_mul_avx512
                          : l == Isa::avx2 ? kernels::silu_mul_avx2
                                           : kernels::silu_mul_scalar);
    EXPECT_EQ(k.gelu, vec(l)             ? kernels::gelu_avx512
                      : l == Isa::avx2 ? kernels::gelu_avx2
                                       : kernels::gelu_scalar);
    for (bool present : {!!k.silu_mul2, !!k.silu_mul_quant_row, !!k.gelu2, !!k.gelu_quant_row})
      EXPECT_EQ(present, vec(l));
  });
  check_table(kernels::rope_kernel_table(), "rope", [](const kernels::RopeKernels& k, Isa l) {
    EXPECT_EQ(k.rotate_heads, vec(l)             ? kernels::rope_rotate_heads_avx512
                              : l == Isa::avx2 ? kernels::rope_rotate_heads_avx2
                                               : kernels::rope_rotate_heads_scalar);
    EXPECT_EQ(k.rotate_two_tokens, vec(l)             ? kernels::rope_rotate_two_tokens_avx512
                                   : l == Isa::avx2 ? kernels::rope_rotate_two_tokens_avx2
                                                    : nullptr);
  });
  check_table(kernels::softmax_kernel_table(), "softmax", [](const kernels::SoftmaxKernels& k, Isa l) {
    EXPECT_EQ(k.row, vec(l)             ? kernels::softmax_row_avx512
                     : l == Isa::avx2 ? kernels::softmax_row_avx2
                                      : kernels::softmax_row_scalar);
    for (bool present : {!!k.bf16_row, !!k.bf16_rows, !!k.f32_row, !!k.f32_rows}) EXPECT_EQ(present, vec(l));
  });
  check_table(kernels::routing_kernel_table(), "routing", [](const kernels::RoutingKernels& k, Isa l) {
    EXPECT_EQ(k.sigmoid_row, vec(l)             ? kernels::sigmoid_row_avx512
                             : l == Isa::avx2 ? kernels::sigmoid_row_avx2
                                              : kernels::sigmoid_row_scalar);
    EXPECT_EQ(k.softmax_row, vec(l)             ? kernels::softmax_row_avx512
                             : l == Isa::avx2 ? kernels::softmax_row_avx2
                                              : kernels::softmax_row_scalar);
    for (bool present : {!!k.keys, !!k.topk, !!k.sigmoid_rows, !!k.softmax_lanes}) EXPECT_EQ(present, vec(l));
  });
  check_table(kernels::select_kernel_table(), "select", [](const kernels::SelectKernels& k, Isa l) {
    EXPECT_EQ(k.collect_above, vec(l) ? kernels::collect_above_avx512 : kernels::collect_above_scalar);
    EXPECT_EQ(k.keep_best, vec(l) ? kernels::keep_best_avx512 : kernels::keep_best_scalar);
    EXPECT_EQ(k.order_best_first, vec(l) ? kernels::order_best_first_avx512 : kernels::order_best_first_scalar);
  });
  check_table(kernels::combine_kernel_table(), "combine", [](const kernels::CombineKernels& k, Isa l) {
    EXPECT_EQ(k.weighted_row_sum, vec(l)             ? kernels::weighted_row_sum_avx512
                                  : l == Isa::avx2 ? kernels::weighted_row_sum_avx2
                                                   : nullptr);
  });
  check_table(kernels::move_kernel_table(), "move bytes", [](const kernels::MoveKernels& k, Isa l) {
    EXPECT_NE(k.copy, nullptr);
    EXPECT_EQ(k.copy == kernels::copy_bytes_avx512, vec(l));
    EXPECT_EQ(!!k.fence, vec(l));
    EXPECT_EQ(!!k.gather_rows, vec(l));
  });
  check_table(kernels::attention_kernel_table(), "attention", [](const kernels::AttentionKernels& k, Isa l) {
    EXPECT_EQ(k.gemm_f32, vec(l) ? kernels::attn_gemm_tile_f32_avx512
                          : l == Isa::avx2 ? kernels::attn_gemm_tile_f32_avx2 : kernels::attn_gemm_tile_f32_scalar);
    // bf16 tile products as f32 FMAs at avx2 (no bf16 dot product) and at avx512 (and amx,
    // which has no entry of its own) on a core that prefers them.
    const bool fma = (kernel_needs_met() & kPrefersFmaBf16) != 0;
    EXPECT_EQ(k.gemm_bf16, vec(l) ? (fma ? kernels::attn_gemm_tile_bf16_widened_avx512 : kernels::attn_gemm_tile_bf16_avx512)
                           : l == Isa::avx2 ? kernels::attn_gemm_tile_bf16_widened_avx2 : kernels::attn_gemm_tile_bf16_scalar);
    // The widened tile and the gather of its A rows come together.
    EXPECT_EQ(k.gather_widened != nullptr, k.gemm_bf16 == kernels::attn_gemm_tile_bf16_widened_avx512 ||
                                               k.gemm_bf16 == kernels::attn_gemm_tile_bf16_widened_avx2);
    EXPECT_EQ(k.softmax_rows, vec(l) ? kernels::attn_softmax_rows_avx512
                              : l == Isa::avx2 ? kernels::attn_softmax_rows_avx2 : kernels::attn_softmax_rows_scalar);
    EXPECT_EQ(k.store_rows, vec(l)             ? kernels::attn_store_rows_avx512
                            : l == Isa::avx2 ? kernels::attn_store_rows_avx2
                                             : kernels::attn_store_rows_scalar);
    EXPECT_EQ(!!k.pack_transposed && !!k.pack_interleaved, vec(l));
  });
  check_table(kernels::mla_kernel_table(), "mla", [](const kernels::MlaKernels& k, Isa l) {
    const bool fma = (kernel_needs_met() & kPrefersFmaBf16) != 0;
    EXPECT_EQ(k.chunk, vec(l)             ? (fma ? kernels::mla_chunk_fma_avx512 : kernels::mla_chunk_avx512)
                       : l == Isa::avx2 ? kernels::mla_chunk_avx2
                                        : kernels::mla_chunk_scalar);
    EXPECT_EQ(k.merge, vec(l) ? kernels::mla_merge_avx512 : kernels::mla_merge_scalar);
    EXPECT_EQ(k.finish, vec(l) ? kernels::mla_finish_avx512 : kernels::mla_finish_scalar);
  });
  check_table(kernels::gemm_kernel_table(), "gemm", [](const kernels::GemmKernels& k, Isa l) {
    // The blocked kernels from avx2 up (their own at avx2), the AMX model from avx512 up.
    for (bool present : {!!k.tile_f32, !!k.tile_bf16, !!k.tile_s8, !!k.pack_a_panel, !!k.pack_b_panel_nt,
                         !!k.pack_b_panel_nn, !!k.widen_e4m3})
      EXPECT_EQ(present, l >= Isa::avx2);
    if (l == Isa::avx2) {
      EXPECT_EQ(k.tile_f32, kernels::gemm_tile_f32_avx2);
      // No bf16 dot product at avx2: bf16 products as f32 FMAs, A packed as f32 pairs.
      EXPECT_EQ(k.tile_bf16, kernels::gemm_tile_bf16_fma_avx2);
      EXPECT_EQ(k.pack_a_panel_f32_pairs, kernels::pack_a_panel_f32_pairs_avx2);
      EXPECT_EQ(k.tile_s8, kernels::gemm_tile_s8_avx2);
      EXPECT_EQ(k.pack_a_panel, kernels::pack_a_panel_avx2);
    }
    if (vec(l)) {
      EXPECT_EQ(k.tile_f32, kernels::gemm_tile_f32_avx512);
      // fp8 widening by VBMI byte tables wherever the CPU has VBMI (every amx CPU does); bf16
      // products as f32 FMAs at the avx512 level of a core that prefers them (the amx level
      // keeps vdpbf16ps beside its tiles), A then packed as f32 pairs.
      const bool vbmi = (kernel_needs_met() & kNeedsVbmi) != 0;
      const bool fma = l == Isa::avx512 && (kernel_needs_met() & kPrefersFmaBf16) != 0;
      EXPECT_EQ(k.tile_bf16, fma ? (vbmi ? kernels::gemm_tile_bf16_fma_vbmi : kernels::gemm_tile_bf16_fma_avx512)
                                 : (vbmi ? kernels::gemm_tile_bf16_vbmi : kernels::gemm_tile_bf16_avx512));
      EXPECT_EQ(k.tile_bf16_pair, fma ? (vbmi ? kernels::gemm_tile_bf16_pair_fma_vbmi : kernels::gemm_tile_bf16_pair_fma_avx512)
                                      : (vbmi ? kernels::gemm_tile_bf16_pair_vbmi : kernels::gemm_tile_bf16_pair_avx512));
      EXPECT_EQ(k.pack_a_panel_f32_pairs, fma ? kernels::pack_a_panel_f32_pairs_avx512 : nullptr);
      if (vbmi) {
        EXPECT_EQ(k.widen_e4m3, kernels::widen_e4m3_vbmi);
        EXPECT_EQ(k.pack_b_panel_nt, kernels::pack_b_panel_nt_vbmi);
      } else {
        EXPECT_NE(k.widen_e4m3, kernels::widen_e4m3_vbmi);
        EXPECT_EQ(k.pack_b_panel_nt, kernels::pack_b_panel_nt_avx512);
      }
    }
    EXPECT_EQ(!!k.amx_model, vec(l));
    EXPECT_EQ(k.amx, l >= Isa::amx ? &kernels::kAmxHardware : nullptr);
    if (l >= Isa::amx) {
      EXPECT_EQ(k.widen_e4m3, kernels::widen_e4m3_vbmi);
      EXPECT_EQ(k.pack_b_panel_nt, kernels::pack_b_panel_nt_vbmi);
    }
  });
  check_table(kernels::engram_kernel_table(), "engram", [](const kernels::EngramKernels& k, Isa l) {
    EXPECT_EQ(k.hash_row, vec(l) ? engram::detail::hash_row_avx512 : engram::detail::hash_row_scalar);
    EXPECT_EQ(k.row_sources, vec(l) ? engram::detail::row_sources_avx512 : engram::detail::row_sources_scalar);
  });
  check_table(kernels::weighted_sum_kernel_table(), "weighted sum", [](const kernels::WeightedSumKernels& k, Isa l) {
    EXPECT_EQ(k.weighted_sum_bf16, vec(l)             ? kernels::weighted_sum_bf16_avx512
                                   : l == Isa::avx2 ? kernels::weighted_sum_bf16_avx2
                                                    : kernels::weighted_sum_bf16_scalar);
  });
}

// A variant with needs wins over its level's general entry only where they are met, and a
// level without a fitting variant takes the general entry (or the level below).
TEST(KernelTables, VariantNeedsDecideAmongOneLevel) {
  static constexpr kernels::RopeKernels kGeneral{kernels::rope_rotate_heads_scalar, nullptr};
  static constexpr kernels::RopeKernels kVariant{kernels::rope_rotate_heads_scalar, nullptr};
  static constexpr kernels::RopeKernels kBelow{kernels::rope_rotate_heads_scalar, nullptr};
  static constexpr KernelEntry<kernels::RopeKernels> kTable[] = {{Backend::cpu, Isa::avx2, &kBelow},
                                                                 {Backend::cpu, Isa::avx512, &kVariant, kNeedsVbmi},
                                                                 {Backend::cpu, Isa::avx512, &kGeneral}};
  const KernelTable<kernels::RopeKernels> table(kTable);
  EXPECT_EQ(best_entry(table, Backend::cpu, Isa::avx512, kNeedsVbmi)->set, &kVariant);
  EXPECT_EQ(best_entry(table, Backend::cpu, Isa::amx, kNeedsVbmi)->set, &kVariant);
  EXPECT_EQ(best_entry(table, Backend::cpu, Isa::avx512, kNeedsNothing)->set, &kGeneral);
  EXPECT_EQ(best_entry(table, Backend::cpu, Isa::avx2, kNeedsVbmi)->set, &kBelow);
  static constexpr KernelEntry<kernels::RopeKernels> kOnlyVariant[] = {{Backend::cpu, Isa::avx2, &kBelow},
                                                                       {Backend::cpu, Isa::avx512, &kVariant, kNeedsVbmi}};
  EXPECT_EQ(best_entry(KernelTable<kernels::RopeKernels>(kOnlyVariant), Backend::cpu, Isa::avx512, kNeedsNothing)->set,
            &kBelow);
  // The test mask hides a feature from select_kernels and gives it back.
  const uint32_t before = mask_kernel_needs(kNeedsVbmi);
  EXPECT_EQ(kernel_needs_met() & kNeedsVbmi, 0u);
  mask_kernel_needs(before);
}

// A trait (what the core is good at) can be forced, so its variant runs on every CPU of its
// level; a feature cannot (its variant would fault where the CPU lacks it). The mask wins.
TEST(KernelTables, OnlyTraitsCanBeForced) {
  const uint32_t before = force_kernel_traits(kPrefersFmaBf16);
  EXPECT_NE(kernel_needs_met() & kPrefersFmaBf16, 0u);
  const uint32_t mask_before = mask_kernel_needs(kPrefersFmaBf16);
  EXPECT_EQ(kernel_needs_met() & kPrefersFmaBf16, 0u);
  mask_kernel_needs(mask_before);
  force_kernel_traits(before);
  EXPECT_EQ(kernel_needs_met() & kPrefersFmaBf16, core_shape().bf16_by_fma && isa_at_least(Isa::avx512) ? kPrefersFmaBf16 : 0u);
  EXPECT_THROW(force_kernel_traits(kNeedsVbmi), Error);
  EXPECT_EQ(force_kernel_traits(0), before);  // the failed call changed nothing
}

// A table without an entry for the level asked (a family that exists only from avx512 on)
// fails with the family's name instead of running a null kernel.
TEST(KernelTables, MissingLevelFailsWithTheFamily) {
  static constexpr kernels::RopeKernels kSet{kernels::rope_rotate_heads_scalar, nullptr};
  static constexpr KernelEntry<kernels::RopeKernels> kOnlyAvx512[] = {{Backend::cpu, Isa::avx512, &kSet}};
  setenv("SOL_ISA", "scalar", 1);
  try {
    select_kernels(KernelTable<kernels::RopeKernels>(kOnlyAvx512), "test family");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test family"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("scalar"), std::string::npos) << e.what();
  }
  unsetenv("SOL_ISA");
}

}  // namespace
}  // namespace sol
