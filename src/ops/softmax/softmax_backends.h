#pragma once
// softmax's whole-op entries per backend (ops/common/op_backends.h), chosen once by x's
// device after the shared checks (shapes, dtypes, contiguity, overlap, one device).
#include "ops/common/op_backends.h"

namespace sol {

using SoftmaxEntry = void (*)(const Tensor& x, const Tensor& y);
const OpBackends<SoftmaxEntry>& softmax_backends();

void softmax_cpu(const Tensor& x, const Tensor& y);
#ifdef SOL_HAS_CUDA
void softmax_cuda(const Tensor& x, const Tensor& y);
#endif

}  // namespace sol
