#pragma once
// Row addressing shared by the ops: a row of a 2-d tensor, a plane of a 3-d one.
#include <cstdint>

#include "sol/tensor.h"

namespace sol {
// Row r of a 2-d tensor whose rows are dense: the byte address of element [r, 0].
inline char* row_at(const Tensor& t, int64_t r) {
  return t.data_as<char>() + r * t.stride(0) * int64_t(dtype_size(t.dtype()));
}

// Plane g of a 3-d tensor as a 2-d view with the same strides (an expert's [N, K] weights).
inline Tensor plane(const Tensor& t, int64_t g) {
  const int64_t shape[2] = {t.shape(1), t.shape(2)}, strides[2] = {t.stride(1), t.stride(2)};
  return Tensor(t.ptr({g, 0, 0}), t.dtype(), shape, strides);
}
}  // namespace sol
