#pragma once
// Embedding gather: out[t, :] = table[ids[t], :]. table [V, H] any dtype with dense rows,
// ids [T] i32, out [T, H] of table's dtype. An id outside [0, V) throws sol::Error naming the
// position and the id (before anything is written).
#include "sol/tensor.h"

namespace sol {
void embedding(const Tensor& table, const Tensor& ids, const Tensor& out);
}  // namespace sol
