#pragma once
// Plain, separately written references for FP8 quantization (tests and `sol check` compare the
// fast paths with these bit for bit). Contiguous tensors only.
#include "sol/quant.h"

namespace sol::reference {
void quant_fp8_per_token(const Tensor& x, const Tensor& q, const Tensor& scales, const QuantOptions& opt);
void quant_fp8_per_block(const Tensor& w, const Tensor& q, const Tensor& scales, const QuantOptions& opt);
void dequant_fp8_per_token(const Tensor& q, const Tensor& scales, const Tensor& y, const QuantOptions& opt);
}  // namespace sol::reference
