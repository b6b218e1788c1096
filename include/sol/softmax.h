#pragma once
// Softmax over the last dimension: y = exp(x - max) / sum(exp(x - max)), per row, in f32.
// x, y: [..., n] f32 or bf16 with dense rows (any leading shape); in place (y = x) allowed.
// Accuracy: f32 outputs to ~1e-6 relative per element (plus |x - max| 2^-24 for f32 inputs,
// the rounding of x - max itself); a bf16 output from f32 input is the rounding of the f32
// output; a bf16 output from bf16 input is within 0.55 of a bf16 ulp of the exact value (the
// correctly rounded one, or near a tie its neighbour: ~1% of outputs), from a cheaper
// exponential.
// -inf entries get probability 0; a row with a NaN, or with +inf, becomes all NaN (as the
// formula gives), never a silently normalised wrong answer.
#include "sol/tensor.h"

namespace sol {
void softmax(const Tensor& x, const Tensor& y);
}  // namespace sol
