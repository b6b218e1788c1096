// The byte-moving kernel table (kernels/move_bytes.h).
#include "kernels/move_bytes.h"

namespace sol::kernels {
namespace {

void copy_portable(void* dst, const void* src, int64_t bytes, bool, bool) { copy_bytes_portable(dst, src, bytes); }
void copy_avx2(void* dst, const void* src, int64_t bytes, bool nontemporal, bool) {
  copy_bytes_avx2(dst, src, bytes, nontemporal);
}

constexpr MoveKernels kScalar{copy_portable, nullptr, nullptr};
constexpr MoveKernels kAvx2{copy_avx2, nullptr, nullptr};
constexpr MoveKernels kAvx512{copy_bytes_avx512, stream_fence_avx512, gather_rows_avx512};
constexpr KernelEntry<MoveKernels> kTable[] = {{Backend::cpu, Isa::scalar, &kScalar},
                                               {Backend::cpu, Isa::avx2, &kAvx2},
                                               {Backend::cpu, Isa::avx512, &kAvx512}};

}  // namespace

KernelTable<MoveKernels> move_kernel_table() { return kTable; }

}  // namespace sol::kernels
