#include <cstring>

#include "kernels/copy.h"

namespace sol::kernels {
// The baseline path (SOL_ISA=scalar): whatever the C library does for this CPU.
void copy_bytes_portable(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, size_t(bytes));
}
}  // namespace sol::kernels
