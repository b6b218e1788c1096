#pragma once
// The plain GEMM reference: every element summed in fp64 from the exact input values, then
// D = act(alpha * sum + beta * C + bias) in fp64 and stored into `out` (contiguous [M, N],
// any float dtype). Obviously right, and slow: for checks and tests only.
#include "sol/gemm.h"

namespace sol {

// b is plain ([K, N] for nn, [N, K] for nt); c is read when beta != 0 (pass D's old contents
// for the in-place case). fp8 operands are multiplied by their block scales (a_scales
// [M, K/128], b_scales [ceil(N/128), K/128]) element by element, exactly, in fp64. Integer
// inputs sum exactly (fp64 holds every test's sums); an i32 `out` saturates.
void reference_gemm(const Tensor& a, const Tensor& b, Layout layout, const Tensor* c, float alpha,
                    float beta, const Tensor* bias, Activation act, const Tensor& out,
                    const Tensor* a_scales = nullptr, const Tensor* b_scales = nullptr);

// DeepGEMM's similarity metric 1 - 2 sum(x y) / sum(x^2 + y^2): 0 for identical tensors.
double gemm_diff_metric(const Tensor& x, const Tensor& y);

}  // namespace sol
