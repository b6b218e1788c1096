#pragma once
// Element-wise reduction of several sources into one destination, accumulating in f32 and
// visiting the sources in the given order (so every rank that reduces the same sources gets
// bit-identical results). f32 and bf16; sum and max. The kernels are kernels/reduce.h's, of the
// ISA level in force when the process first reduces.
#include <cstdint>

#include "sol/comm.h"
#include "sol/dtype.h"

namespace sol::comm::detail {

bool reducible(DType t);
// dst may alias any source. `stream`: the caller's working set exceeds the last-level cache, so
// the results are written with non-temporal stores (no read-for-ownership of dst; fenced
// before returning, so a release store afterwards publishes them).
void reduce_sources(void* dst, const void* const* sources, int count_sources, int64_t elements,
                    DType dtype, ReduceOp op, bool stream = false);

// The same result written to every one of `count_dsts` destinations (each may alias a source
// at the same position): an allreduce pushes its part into every rank's output at once.
void reduce_sources_to(void* const* dsts, int count_dsts, const void* const* sources, int count_sources,
                       int64_t elements, DType dtype, ReduceOp op, bool stream = false);

}  // namespace sol::comm::detail
