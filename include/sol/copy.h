#pragma once
// Data movement: copy (same dtype) and cast (between f32, bf16, f16, f8e4m3, f8e5m2).
// Memory-bound by nature; both stream through non-temporal stores once the output outgrows
// the last-level cache, and split the range over Sol's threads.
#include "sol/tensor.h"

namespace sol {

// dst = src. Same shape and dtype; any strides (contiguous views take the vector path);
// overlapping src and dst throw sol::Error.
void copy(const Tensor& src, const Tensor& dst);

// dst = convert(src) with round-to-nearest-even and the saturation rules of sol/dtype.h.
// Same shape, contiguous, float dtypes; src and dst must not overlap.
void cast(const Tensor& src, const Tensor& dst);

}  // namespace sol
