// The attention kernel tables: flash attention (kernels/attention.h) and MLA decode
// (x86/avx512/mla_chunk_avx512.h, which declares every level's entry points).
#include "kernels/attention.h"
#include "kernels/x86/avx512/mla_chunk_avx512.h"

namespace sol::kernels {
namespace {

constexpr AttentionKernels kScalar{attn_gemm_tile_f32_scalar, attn_gemm_tile_bf16_scalar, attn_softmax_rows_scalar,
                                   attn_grad_rows_scalar,     attn_store_rows_scalar,     nullptr,
                                   nullptr,                   nullptr};
// No bf16 dot product at avx2: bf16 tile products as f32 FMAs on A rows widened once.
constexpr AttentionKernels kAvx2{attn_gemm_tile_f32_avx2, attn_gemm_tile_bf16_widened_avx2, attn_softmax_rows_avx2,
                                 attn_grad_rows_avx2,     attn_store_rows_avx2,             nullptr,
                                 nullptr,                 attn_gather_widened_avx2};
constexpr AttentionKernels kAvx512{attn_gemm_tile_f32_avx512, attn_gemm_tile_bf16_avx512, attn_softmax_rows_avx512,
                                   attn_grad_rows_avx512,     attn_store_rows_avx512,     attn_pack_transposed_avx512,
                                   attn_pack_interleaved_avx512, nullptr};
// Intel's AVX-512 cores: bf16 tile products as f32 FMAs (two pipes against one vdpbf16ps every
// ~2 cycles), A rows widened to f32 once, where they are gathered or written.
constexpr AttentionKernels with_fma(AttentionKernels k) {
  k.gemm_bf16 = attn_gemm_tile_bf16_widened_avx512;
  k.gather_widened = attn_gather_widened_avx512;
  return k;
}
constexpr AttentionKernels kAvx512Fma = with_fma(kAvx512);
constexpr KernelEntry<AttentionKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                                    {Backend::cpu, Isa::avx2, &kAvx2},
                                                    {Backend::cpu, Isa::avx512, &kAvx512Fma, kPrefersFmaBf16},
                                                    {Backend::cpu, Isa::avx512, &kAvx512}};

constexpr MlaKernels kMlaScalar{mla_chunk_scalar, mla_merge_scalar, mla_finish_scalar};
constexpr MlaKernels kMlaAvx2{mla_chunk_avx2, mla_merge_scalar, mla_finish_scalar};
constexpr MlaKernels kMlaAvx512{mla_chunk_avx512, mla_merge_avx512, mla_finish_avx512};
constexpr MlaKernels kMlaAvx512Fma{mla_chunk_fma_avx512, mla_merge_avx512, mla_finish_avx512};
constexpr KernelEntry<MlaKernels> kMlaTable[] = {{Backend::cpu, Isa::scalar, &kMlaScalar},
                                                 {Backend::cpu, Isa::avx2, &kMlaAvx2},
                                                 {Backend::cpu, Isa::avx512, &kMlaAvx512Fma, kPrefersFmaBf16},
                                                 {Backend::cpu, Isa::avx512, &kMlaAvx512}};

}  // namespace

KernelTable<AttentionKernels> attention_kernel_table() { return kTable; }
KernelTable<MlaKernels> mla_kernel_table() { return kMlaTable; }

}  // namespace sol::kernels
