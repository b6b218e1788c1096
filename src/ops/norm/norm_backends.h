#pragma once
// The RMSNorm ops' whole-op entries per backend (ops/common/op_backends.h), chosen by the
// operands' device after the op has validated them. (layernorm runs on the cpu only.)
#include "ops/common/op_backends.h"
#include "sol/norm.h"

namespace sol {

using RmsnormEntry = void (*)(const Tensor& x, const Tensor& weight, const Tensor& y, const NormOptions& opt);
using AddRmsnormEntry = void (*)(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& y,
                                 const NormOptions& opt);
using RmsnormQuantEntry = void (*)(const Tensor& x, const Tensor& weight, const Tensor& q, const Tensor& scales,
                                   const NormOptions& opt, const QuantOptions& qopt);

struct NormBackends {
  OpBackends<RmsnormEntry> rmsnorm;
  OpBackends<AddRmsnormEntry> add_rmsnorm;
  OpBackends<RmsnormQuantEntry> rmsnorm_quant_fp8;
};
const NormBackends& norm_backends();

#ifdef SOL_HAS_CUDA
void rmsnorm_cuda(const Tensor& x, const Tensor& weight, const Tensor& y, const NormOptions& opt);
void add_rmsnorm_cuda(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& y,
                      const NormOptions& opt);
void rmsnorm_quant_fp8_cuda(const Tensor& x, const Tensor& weight, const Tensor& q, const Tensor& scales,
                            const NormOptions& opt, const QuantOptions& qopt);
#endif

}  // namespace sol
