// The quantization family's kernel table (kernels/quant.h).
#include <cstring>

#include "kernels/convert.h"
#include "kernels/copy.h"
#include "kernels/quant.h"

namespace sol::kernels {
namespace {

void from_f32_scalar(const float* in, void* out, DType t, int64_t n) {
  if (t == DType::f32) std::memcpy(out, in, size_t(n) * 4);
  else convert_scalar(in, DType::f32, out, t, n);
}
void from_f32_avx2(const float* in, void* out, DType t, int64_t n) {
  if (t == DType::f32) std::memcpy(out, in, size_t(n) * 4);
  else convert_avx2(in, DType::f32, out, t, n, false, 0);
}
void from_f32_avx512(const float* in, void* out, DType t, int64_t n) {
  if (t == DType::f32) std::memcpy(out, in, size_t(n) * 4);
  else convert_avx512(in, DType::f32, out, t, n, false, 0);
}

constexpr QuantKernels kScalar{abs_max_scalar, scale_to_f32_scalar, dequant_scale_scalar, from_f32_scalar,
                               nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};
constexpr QuantKernels kAvx2{abs_max_avx2, scale_to_f32_avx2, dequant_scale_avx2, from_f32_avx2,
                             nullptr,      nullptr,           nullptr,            nullptr,
                             nullptr,      nullptr,           nullptr,            nullptr,
                             nullptr};
constexpr QuantKernels kAvx512{abs_max_avx512,
                               scale_to_f32_avx512,
                               dequant_scale_avx512,
                               from_f32_avx512,
                               quant_row_e4m3_avx512,
                               quant_row_bf16_amax_avx512,
                               block_amax_rows_bf16_avx512,
                               block_amax_finish_avx512,
                               quant_panel_mults_bf16_avx512,
                               even_odd_order_avx512,
                               rms_quant_row_bf16_avx512,
                               dequant_row_avx512,
                               stream_fence_avx512};
constexpr KernelEntry<QuantKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                                {Backend::cpu, Isa::avx2, &kAvx2},
                                                {Backend::cpu, Isa::avx512, &kAvx512}};

}  // namespace

KernelTable<QuantKernels> quant_kernel_table() { return kTable; }

}  // namespace sol::kernels
