// The collectives' reductions: the kernel set of the ISA level in force (kernels/reduce.h).
#include "comm/reduce.h"

#include "hw/kernel_select.h"
#include "kernels/reduce.h"

namespace sol::comm::detail {

namespace {

// Chosen once per process: reading SOL_ISA on every call would cost more than an 8-byte
// reduction, and every rank of a job runs the level it started with.
const kernels::ReduceKernels& reduce_kernels() {
  static const kernels::ReduceKernels& k = select_kernels(kernels::reduce_kernel_table(), "reduce");
  return k;
}

}  // namespace

bool reducible(DType t) { return t == DType::f32 || t == DType::bf16; }

void reduce_sources_to(void* const* dsts, int count_dsts, const void* const* sources, int count_sources,
                       int64_t elements, DType dtype, ReduceOp op, bool stream) {
  if (elements <= 0 || count_sources <= 0 || count_dsts <= 0) return;
  reduce_kernels().reduce_to(dsts, count_dsts, sources, count_sources, elements, dtype, op, stream);
}

void reduce_sources(void* dst, const void* const* sources, int count_sources, int64_t elements,
                    DType dtype, ReduceOp op, bool stream) {
  reduce_sources_to(&dst, 1, sources, count_sources, elements, dtype, op, stream);
}

}  // namespace sol::comm::detail
