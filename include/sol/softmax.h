#pragma once
// Softmax over the last dimension: y = exp(x - max) / sum(exp(x - max)), per row, in f32.
// x, y: [..., n] f32 or bf16 with dense rows (any leading shape); in place (y = x) allowed.
// -inf entries get probability 0; a row with a NaN, or with +inf, becomes all NaN (as the
// formula gives), never a silently normalised wrong answer.
#include "sol/tensor.h"

namespace sol {
void softmax(const Tensor& x, const Tensor& y);
}  // namespace sol
