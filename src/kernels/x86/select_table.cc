// The sampler's selection kernel table (kernels/select.h).
#include "kernels/select.h"

namespace sol::kernels {
namespace {

constexpr SelectKernels kScalar{collect_above_scalar, keep_best_scalar, order_best_first_scalar};
constexpr SelectKernels kAvx512{collect_above_avx512, keep_best_avx512, order_best_first_avx512};
constexpr KernelEntry<SelectKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                                 {Backend::cpu, Isa::avx512, &kAvx512}};

}  // namespace

KernelTable<SelectKernels> select_kernel_table() { return kTable; }

}  // namespace sol::kernels
