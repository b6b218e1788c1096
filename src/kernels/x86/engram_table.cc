// Engram's kernel table (kernels/engram.h).
#include "kernels/engram.h"

namespace sol::kernels {
namespace {

using namespace engram::detail;

constexpr EngramKernels kScalar{hash_row_scalar, row_sources_scalar};
constexpr EngramKernels kAvx512{hash_row_avx512, row_sources_avx512};
constexpr KernelEntry<EngramKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                                 {Backend::cpu, Isa::avx512, &kAvx512}};

}  // namespace

KernelTable<EngramKernels> engram_kernel_table() { return kTable; }

}  // namespace sol::kernels
