#pragma once
// SwiGLU's gate and GELU in f32, as sol/activation.h defines them and in the forms the CPU's
// scalar path evaluates (src/kernels/x86/activation_scalar.cc): the same expressions, with the
// device's expf / erfcf (a few ulp) where the CPU uses its libm or a vector exp. The API promises
// closeness, not bits (a bf16 output within 1 ulp of the correctly rounded value).
#include "kernels/cuda/float_ops.cuh"

namespace sol_cuda {

SOL_HD float exp_f32(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return __builtin_expf(x);
#endif
}
SOL_HD float erfc_f32(float x) {
#if defined(__CUDA_ARCH__)
  return erfcf(x);
#else
  return __builtin_erfcf(x);
#endif
}

// silu(g) * u = g / (1 + exp(-g)) * u.
SOL_HD float silu_mul_of(float g, float u) { return mul_rn(div_rn(g, add_rn(1.0f, exp_f32(-g))), u); }

// 1 + erf(z) = erfc(-z) and 1 + tanh(t) = 2 / (1 + exp(-2t)): neither cancels in the negative
// tail, where 1 + erf or 1 + tanh would lose every digit in f32.
SOL_HD float gelu_of(float v, bool erf_form) {
  if (erf_form) return mul_rn(mul_rn(0.5f, v), erfc_f32(mul_rn(-v, 0.70710678118654752f)));
  const float cube = mul_rn(mul_rn(mul_rn(0.044715f, v), v), v);
  const float t = mul_rn(mul_rn(-2.0f, 0.79788456080286536f), add_rn(v, cube));
  return div_rn(v, add_rn(1.0f, exp_f32(t)));
}

}  // namespace sol_cuda
