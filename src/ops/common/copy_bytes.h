#pragma once
// The byte-copy kernel of an ISA level. The caller reads active_isa() once per op, not once per
// row: it re-reads SOL_ISA from the environment.
#include <cstdint>

#include "kernels/copy.h"
#include "sol/hw.h"

namespace sol {
inline void copy_bytes(Isa isa, void* dst, const void* src, int64_t bytes, bool stream) {
  if (isa >= Isa::avx512) kernels::copy_bytes_avx512(dst, src, bytes, stream);
  else if (isa >= Isa::avx2) kernels::copy_bytes_avx2(dst, src, bytes, stream);
  else kernels::copy_bytes_portable(dst, src, bytes);
}
}  // namespace sol
