// Rope's kernel table (kernels/rope.h).
#include "kernels/rope.h"

namespace sol::kernels {
namespace {

constexpr RopeKernels kScalar{rope_rotate_heads_scalar, nullptr};
constexpr RopeKernels kAvx2{rope_rotate_heads_avx2, rope_rotate_two_tokens_avx2};
constexpr RopeKernels kAvx512{rope_rotate_heads_avx512, rope_rotate_two_tokens_avx512};
constexpr KernelEntry<RopeKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                               {Backend::cpu, Isa::avx2, &kAvx2},
                                               {Backend::cpu, Isa::avx512, &kAvx512}};

}  // namespace

KernelTable<RopeKernels> rope_kernel_table() { return kTable; }

}  // namespace sol::kernels
