#pragma once
// Plain fp64 references of the norms (contiguous tensors only).
#include "sol/norm.h"

namespace sol::reference {
// y = x / sqrt(mean(x^2) + eps) * w, in double, rounded once to y's dtype.
void rmsnorm(const Tensor& x, const Tensor& weight, const Tensor& y, double eps);
// y = (x - mean) / sqrt(var + eps) * w + b, in double (b may be null).
void layernorm(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& y, double eps);
}  // namespace sol::reference
