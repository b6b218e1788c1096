#pragma once
// Element-wise reductions of several sources, per ISA, as a table (core/kernel_table.h): the
// collectives' and EP combine's sums and maxima. Sources are visited in the given order and
// accumulated in f32, so every caller that reduces the same sources gets the same bits on one
// level; f32 and bf16 elements.
#include <cstdint>

#include "core/kernel_table.h"
#include "sol/dtype.h"
#include "sol/reduce_op.h"

namespace sol::kernels {

// The same result written to each of `count_dsts` destinations (each may alias a source at
// the same position). stream: non-temporal stores where the destinations are vector-aligned,
// fenced before returning; a level without them ignores it.
using ReduceToKernel = void (*)(void* const* dsts, int count_dsts, const void* const* sources, int count_sources,
                                int64_t elements, DType dtype, ReduceOp op, bool stream);

struct ReduceKernels {
  ReduceToKernel reduce_to;
};
KernelTable<ReduceKernels> reduce_kernel_table();

void reduce_sources_to_portable(void* const* dsts, int count_dsts, const void* const* sources, int count_sources,
                                int64_t elements, DType dtype, ReduceOp op, bool stream);
// AVX2: the portable bits (any NaN where the portable path gives one).
void reduce_sources_to_avx2(void* const* dsts, int count_dsts, const void* const* sources, int count_sources,
                            int64_t elements, DType dtype, ReduceOp op, bool stream);
// AVX-512: rounds bf16 with vcvtneps2bf16, which flushes subnormal results to zero.
void reduce_sources_to_avx512(void* const* dsts, int count_dsts, const void* const* sources, int count_sources,
                              int64_t elements, DType dtype, ReduceOp op, bool stream);

}  // namespace sol::kernels
