// The activations' kernel table (kernels/activation.h).
#include "kernels/activation.h"

namespace sol::kernels {
namespace {

constexpr ActivationKernels kScalar{silu_mul_scalar, nullptr, nullptr, gelu_scalar, nullptr, nullptr};
constexpr ActivationKernels kAvx2{silu_mul_avx2, nullptr, nullptr, gelu_avx2, nullptr, nullptr};
constexpr ActivationKernels kAvx512{silu_mul_avx512, silu_mul2_avx512, silu_mul_quant_row_avx512,
                                    gelu_avx512,     gelu2_avx512,     gelu_quant_row_avx512};
constexpr KernelEntry<ActivationKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                                     {Backend::cpu, Isa::avx2, &kAvx2},
                                                     {Backend::cpu, Isa::avx512, &kAvx512}};

}  // namespace

KernelTable<ActivationKernels> activation_kernel_table() { return kTable; }

}  // namespace sol::kernels
