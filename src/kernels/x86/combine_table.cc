// MoE combine's kernel table (kernels/combine.h).
#include "kernels/combine.h"

namespace sol::kernels {
namespace {

constexpr CombineKernels kScalar{nullptr};
constexpr CombineKernels kAvx2{weighted_row_sum_avx2};
constexpr CombineKernels kAvx512{weighted_row_sum_avx512};
constexpr KernelEntry<CombineKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                                  {Backend::cpu, Isa::avx2, &kAvx2},
                                                  {Backend::cpu, Isa::avx512, &kAvx512}};

}  // namespace

KernelTable<CombineKernels> combine_kernel_table() { return kTable; }

}  // namespace sol::kernels
