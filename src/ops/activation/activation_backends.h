#pragma once
// The activation ops' whole-op entries per backend (ops/common/op_backends.h), chosen by the
// operands' device after the op has validated them.
#include "ops/common/op_backends.h"
#include "sol/activation.h"

namespace sol {

using SiluMulEntry = void (*)(const Tensor& gate_up, const Tensor& y);
using SiluMulQuantEntry = void (*)(const Tensor& gate_up, const Tensor& q, const Tensor& scales,
                                   const QuantOptions& qopt);
using GeluEntry = void (*)(const Tensor& x, const Tensor& y, GeluForm form);
using GeluQuantEntry = void (*)(const Tensor& x, const Tensor& q, const Tensor& scales, GeluForm form,
                                const QuantOptions& qopt);

struct ActivationBackends {
  OpBackends<SiluMulEntry> silu_mul;
  OpBackends<SiluMulQuantEntry> silu_mul_quant_fp8;
  OpBackends<GeluEntry> gelu;
  OpBackends<GeluQuantEntry> gelu_quant_fp8;
};
const ActivationBackends& activation_backends();

#ifdef SOL_HAS_CUDA
void silu_mul_cuda(const Tensor& gate_up, const Tensor& y);
void silu_mul_quant_fp8_cuda(const Tensor& gate_up, const Tensor& q, const Tensor& scales, const QuantOptions& qopt);
void gelu_cuda(const Tensor& x, const Tensor& y, GeluForm form);
void gelu_quant_fp8_cuda(const Tensor& x, const Tensor& q, const Tensor& scales, GeluForm form,
                         const QuantOptions& qopt);
#endif

}  // namespace sol
