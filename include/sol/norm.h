#pragma once
// RMSNorm over the last dimension, with the fusions an LLM layer wants:
//   rmsnorm:           y = x / sqrt(mean(x^2) + eps) * weight
//   add_rmsnorm:       residual = residual + x (rounded to residual's dtype), then
//                      y = rmsnorm(residual) — the new residual is what the next layer adds to,
//                      and the norm is taken of exactly that stored value
//   rmsnorm_quant_fp8: q, scales = quant_fp8_per_token(rmsnorm(x) rounded to bf16) in one pass
//                      over memory (the normalised row never leaves L1)
//   layernorm:         y = (x - mean) / sqrt(var + eps) * weight + bias (bias optional), mean and
//                      variance in two passes
// x, residual, y: [T, H] f32 or bf16, rows dense; weight: [H] f32 or bf16. Statistics in f32
// with a fixed summation order (results do not depend on the thread count).
#include "sol/quant.h"
#include "sol/tensor.h"

namespace sol {

struct NormOptions {
  float eps = 1e-6f;
};

void rmsnorm(const Tensor& x, const Tensor& weight, const Tensor& y, const NormOptions& opt = {});
void add_rmsnorm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& y,
                 const NormOptions& opt = {});
void layernorm(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& y,
               const NormOptions& opt = {});
void rmsnorm_quant_fp8(const Tensor& x, const Tensor& weight, const Tensor& q, const Tensor& scales,
                       const NormOptions& opt = {}, const QuantOptions& qopt = {});

}  // namespace sol
