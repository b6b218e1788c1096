#pragma once
// Row r of a 2-d tensor whose rows are dense: the byte address of element [r, 0].
#include <cstdint>

#include "sol/tensor.h"

namespace sol {
inline char* row_at(const Tensor& t, int64_t r) {
  return t.data_as<char>() + r * t.stride(0) * int64_t(dtype_size(t.dtype()));
}
}  // namespace sol
