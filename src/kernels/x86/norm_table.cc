// The norms' kernel table (kernels/norm.h).
#include "kernels/convert.h"
#include "kernels/copy.h"
#include "kernels/norm.h"

namespace sol::kernels {
namespace {

void widen_to_f32_avx512(const void* src, DType t, float* dst, int64_t n) {
  convert_avx512(src, t, dst, DType::f32, n, false, 0);
}

// The row pipeline's members are null below AVX-512 but the bf16 ones of rmsnorm (and its
// residual add) and layernorm at AVX2 (named, so -Wextra sees none missing); the AVX2 level
// vectorizes the portable members.
constexpr NormKernels kScalar{sum_squares_scalar, sum_scalar, shifted_sums_scalar, scale_by_weight_scalar,
                              add_into_scalar,    layernorm_apply_scalar,
                              nullptr,            nullptr,
                              nullptr,            nullptr,
                              nullptr,            nullptr,
                              nullptr,            nullptr,
                              nullptr,            nullptr,
                              nullptr,            nullptr};
constexpr NormKernels kAvx2{sum_squares_avx2,
                            sum_avx2,
                            shifted_sums_avx2,
                            scale_by_weight_avx2,
                            add_into_avx2,
                            layernorm_apply_avx2,
                            add_sum_squares_avx2,
                            nullptr,
                            rms_apply_bf16w_avx2,
                            rms_apply_bf16w_next_avx2,
                            nullptr,
                            nullptr,
                            nullptr,
                            layernorm_apply_bf16w_avx2,
                            layernorm_apply_bf16w_next_avx2,
                            nullptr,
                            nullptr,
                            stream_fence_avx2};
constexpr NormKernels kAvx512{sum_squares_avx512,
                              sum_avx512,
                              shifted_sums_avx512,
                              scale_by_weight_scalar,
                              add_into_avx512,
                              layernorm_apply_scalar,
                              add_sum_squares_avx512,
                              rms_apply_avx512,
                              rms_apply_bf16w_avx512,
                              rms_apply_bf16w_next_avx512,
                              rms_apply_bf16_amax_avx512,
                              layernorm_apply_f32w_avx512,
                              layernorm_apply_packed_avx512,
                              layernorm_apply_bf16w_avx512,
                              layernorm_apply_bf16w_next_avx512,
                              pack_bf16_pairs_avx512,
                              widen_to_f32_avx512,
                              stream_fence_avx512};
constexpr KernelEntry<NormKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                               {Backend::cpu, Isa::avx2, &kAvx2},
                                               {Backend::cpu, Isa::avx512, &kAvx512}};

}  // namespace

KernelTable<NormKernels> norm_kernel_table() { return kTable; }

}  // namespace sol::kernels
