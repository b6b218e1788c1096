#pragma once
// The byte-moving kernels one ISA level offers, as a table (kernels/kernel_table.h): used by
// ops that move rows unchanged (embedding, MoE permute) and by comm, ep and engram, which copy
// messages and rows between buffers.
#include <cstdint>

#include "kernels/copy.h"
#include "kernels/gather.h"
#include "core/kernel_table.h"

namespace sol::kernels {

struct MoveKernels {
  // dst <- src (no overlap, any alignment). nontemporal: stream the stores past the cache.
  // fence = false leaves streamed stores unordered for one `fence()` after a batch; a level
  // whose fence is null orders every copy itself and ignores it.
  void (*copy)(void* dst, const void* src, int64_t bytes, bool nontemporal, bool fence);
  void (*fence)();
  // Rows gathered by pointer (kernels/gather.h); null: copy row by row.
  decltype(&gather_rows_avx512) gather_rows;
};
KernelTable<MoveKernels> move_kernel_table();

}  // namespace sol::kernels
