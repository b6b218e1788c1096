// The reductions' kernel table (kernels/reduce.h).
#include "kernels/reduce.h"

namespace sol::kernels {
namespace {

constexpr ReduceKernels kScalar{reduce_sources_to_portable};
constexpr ReduceKernels kAvx2{reduce_sources_to_avx2};
constexpr ReduceKernels kAvx512{reduce_sources_to_avx512};
constexpr KernelEntry<ReduceKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                                 {Backend::cpu, Isa::avx2, &kAvx2},
                                                 {Backend::cpu, Isa::avx512, &kAvx512}};

}  // namespace

KernelTable<ReduceKernels> reduce_kernel_table() { return kTable; }

}  // namespace sol::kernels
