#pragma once
// The quantization family's whole-op entries per backend (ops/common/op_backends.h), chosen by
// the operands' device after the op has validated them.
#include "ops/common/op_backends.h"
#include "sol/quant.h"

namespace sol {

using QuantEntry = void (*)(const Tensor& x, const Tensor& q, const Tensor& scales, const QuantOptions& opt);

const OpBackends<QuantEntry>& quant_per_token_backends();
const OpBackends<QuantEntry>& quant_per_block_backends();

void quant_fp8_per_token_cpu(const Tensor& x, const Tensor& q, const Tensor& scales, const QuantOptions& opt);
void quant_fp8_per_block_cpu(const Tensor& w, const Tensor& q, const Tensor& scales, const QuantOptions& opt);
#ifdef SOL_HAS_CUDA
void quant_fp8_per_token_cuda(const Tensor& x, const Tensor& q, const Tensor& scales, const QuantOptions& opt);
void quant_fp8_per_block_cuda(const Tensor& w, const Tensor& q, const Tensor& scales, const QuantOptions& opt);
#endif

}  // namespace sol
