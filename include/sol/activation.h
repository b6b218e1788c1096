#pragma once
// SwiGLU's gate: y = silu(gate) * up, with silu(g) = g / (1 + exp(-g)).
//   gate_up [T, 2I] holds the gate in columns [0, I) and the up projection in [I, 2I) (the
//   layout a fused gate/up GEMM writes); y [T, I]. f32 or bf16; arithmetic in f32. A bf16 y
//   holds the correctly rounded value or one of its neighbours (1 ulp), as gelu's (AVX-512
//   computes bf16 outputs with a cheaper kernel than f32 outputs, so they need not be the
//   rounding of the f32 result).
//   silu_mul_quant_fp8: q, scales = quant_fp8_per_token(silu_mul(gate_up) rounded to bf16), one
//   pass over memory, bit-identical to the composition.
#include "sol/quant.h"
#include "sol/tensor.h"

namespace sol {

void silu_mul(const Tensor& gate_up, const Tensor& y);

// GELU, elementwise: tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) or the
// exact 0.5 x (1 + erf(x / sqrt(2))). x, y: [T, H] f32 or bf16 with dense rows. A bf16 y holds
// the correctly rounded value or one of its neighbours (1 ulp).
enum class GeluForm { tanh, erf };
void gelu(const Tensor& x, const Tensor& y, GeluForm form = GeluForm::tanh);
// q, scales = quant_fp8_per_token(gelu(x) rounded to bf16), one pass over memory.
void gelu_quant_fp8(const Tensor& x, const Tensor& q, const Tensor& scales, GeluForm form = GeluForm::tanh,
                    const QuantOptions& qopt = {});
void silu_mul_quant_fp8(const Tensor& gate_up, const Tensor& q, const Tensor& scales,
                        const QuantOptions& qopt = {});

}  // namespace sol
