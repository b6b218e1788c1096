// GEMM's kernel table (kernels/gemm.h).
#include "kernels/convert.h"
#include "kernels/gemm.h"

namespace sol::kernels {
namespace {

void widen_e4m3_avx512(const void* src, uint16_t* dst, int64_t n) {
  convert_avx512(src, DType::f8e4m3, dst, DType::bf16, n, false, 0);
}

constexpr GemmKernels kScalar{nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                               nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
// AVX2 has no bf16 dot product: its bf16 tile multiplies by f32 FMAs, A packed as f32 pairs
// (faster than widening A in registers on every use; docs/perf/gemm.md). kAvx2Pairs keeps that tile for
// generated code, which packs bf16 pairs (compiler/jit/runtime_table.cc); listed second, it is
// never what a plain lookup of the level returns.
constexpr GemmKernels kAvx2Pairs{gemm_tile_f32_avx2,   gemm_tile_bf16_avx2,  gemm_tile_s8_avx2,
                                 pack_a_panel_avx2,    pack_b_panel_nt_avx2, pack_b_panel_nn_avx2,
                                 widen_e4m3_avx2,      nullptr,              nullptr,
                                 nullptr,              nullptr,              nullptr,
                                 nullptr,              nullptr};
constexpr GemmKernels with_fma_avx2(GemmKernels k) {
  k.tile_bf16 = gemm_tile_bf16_fma_avx2;
  k.pack_a_panel_f32_pairs = pack_a_panel_f32_pairs_avx2;
  return k;
}
constexpr GemmKernels kAvx2 = with_fma_avx2(kAvx2Pairs);
constexpr GemmKernels kAvx512{gemm_tile_f32_avx512,       gemm_tile_bf16_avx512, gemm_tile_s8_avx512,
                              pack_a_panel_avx512,        pack_b_panel_nt_avx512, pack_b_panel_nn_avx512,     
                              widen_e4m3_avx512,          nullptr,               &kAmxModel,
                              nullptr,                    &kAmxDecodeModel,      gemm_tile_bf16_pair_avx512,
                              gemm_tile_s8_pair_avx512,   nullptr};
// The avx512 level on a core with VBMI (Zen 4 and 5): its set with the VBMI members — fp8 B
// widened by byte tables, which halves the shuffle work of a decode's fp8 weights, and a plain
// nt fp8 B packed by the byte transpose (docs/perf/gemm.md).
constexpr GemmKernels with_vbmi(GemmKernels k) {
  k.tile_bf16 = gemm_tile_bf16_vbmi;
  k.tile_bf16_pair = gemm_tile_bf16_pair_vbmi;
  k.pack_b_panel_nt = pack_b_panel_nt_vbmi;
  k.widen_e4m3 = widen_e4m3_vbmi;
  return k;
}
constexpr GemmKernels kAvx512Vbmi = with_vbmi(kAvx512);
// The avx512 level on a core whose two FMA pipes outrun its bf16 dot product (Intel's AVX-512
// cores; CoreShape::bf16_by_fma): bf16 and fp8 products as f32 FMAs, A packed as f32 pairs.
// 1.8x the vdpbf16ps tile's rate with operands in L1 on an Emerald Rapids core
// (docs/perf/gemm.md).
constexpr GemmKernels with_fma(GemmKernels k, bool vbmi) {
  k.tile_bf16 = vbmi ? gemm_tile_bf16_fma_vbmi : gemm_tile_bf16_fma_avx512;
  k.tile_bf16_pair = vbmi ? gemm_tile_bf16_pair_fma_vbmi : gemm_tile_bf16_pair_fma_avx512;
  k.pack_a_panel_f32_pairs = pack_a_panel_f32_pairs_avx512;
  return k;
}
constexpr GemmKernels kAvx512Fma = with_fma(kAvx512, false);
constexpr GemmKernels kAvx512VbmiFma = with_fma(kAvx512Vbmi, true);
// Every AMX CPU has VBMI: the amx level is the VBMI set plus the matrix unit's kernels.
constexpr GemmKernels with_amx(GemmKernels k) {
  k.amx = &kAmxHardware;
  k.amx_decode = &kAmxDecodeHardware;
  return k;
}
constexpr GemmKernels kAmx = with_amx(kAvx512Vbmi);
constexpr KernelEntry<GemmKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                               {Backend::cpu, Isa::avx2, &kAvx2},
                                               {Backend::cpu, Isa::avx2, &kAvx2Pairs},
                                               {Backend::cpu, Isa::avx512, &kAvx512VbmiFma, kNeedsVbmi | kPrefersFmaBf16},
                                               {Backend::cpu, Isa::avx512, &kAvx512Fma, kPrefersFmaBf16},
                                               {Backend::cpu, Isa::avx512, &kAvx512Vbmi, kNeedsVbmi},
                                               {Backend::cpu, Isa::avx512, &kAvx512},
                                               {Backend::cpu, Isa::amx, &kAmx}};

}  // namespace

KernelTable<GemmKernels> gemm_kernel_table() { return kTable; }

}  // namespace sol::kernels
