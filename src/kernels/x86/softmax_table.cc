// Softmax's kernel table (kernels/softmax.h).
#include "kernels/softmax.h"

namespace sol::kernels {
namespace {

constexpr SoftmaxKernels kScalar{softmax_row_scalar, nullptr, nullptr, nullptr, nullptr};
constexpr SoftmaxKernels kAvx2{softmax_row_avx2, nullptr, nullptr, nullptr, nullptr};
constexpr SoftmaxKernels kAvx512{softmax_row_avx512, softmax_op_row_avx512, softmax_rows_avx512,
                                 softmax_two_pass_row_avx512, softmax_two_pass_rows_avx512};
constexpr KernelEntry<SoftmaxKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                                  {Backend::cpu, Isa::avx2, &kAvx2},
                                                  {Backend::cpu, Isa::avx512, &kAvx512}};

}  // namespace

KernelTable<SoftmaxKernels> softmax_kernel_table() { return kTable; }

}  // namespace sol::kernels
