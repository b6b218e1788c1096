#pragma once
// The sm90 GEMM's epilogue, D = act(alpha * acc + beta * C + bias), with the CPU GEMM's order of
// operations (include/sol/gemm.h, the AVX-512 tile's finish_vector): alpha * acc rounded, then
// C * beta added in one fused multiply-add, then bias, then silu(x) = x / (1 + exp(-x)), then
// one rounding to D's dtype. beta == 0 never reads C (it may hold anything, NaN included).
// The kernels (registers to D, and the split-K reduction after the sum) and the CPU model both
// call epilogue_value, so the model checks the same arithmetic on the host. Every rounding is
// float_ops.cuh's _rn operation: a plain alpha * acc + bias would be contracted into one FMA on
// the device, while the CPU rounds the product first.

#include "kernels/cuda/float_ops.cuh"
#include "kernels/cuda/sm90/sm90_defs.h"

namespace sol::kernels::sm90 {

// One launch's epilogue: where D goes and what is applied on the way (an argument of the
// kernel, so one compiled configuration serves every combination).
struct GemmEpilogueParams {
  void* d = nullptr;            // [rows, n], bf16 or (d_f32) f32, row-major and dense
  const void* c = nullptr;      // [rows, n], D's dtype; read only when beta != 0 (may equal d)
  const float* bias = nullptr;  // [n], or null
  float alpha = 1.0f, beta = 0.0f;
  u32 d_f32 = 0;  // D (and C) are f32, else bf16
  u32 silu = 0;
};

SOL_SM90_HD float epilogue_silu(float x) {
#if defined(__CUDA_ARCH__)
  return x / (1.0f + expf(-x));
#else
  return x / (1.0f + __builtin_expf(-x));
#endif
}

// True when the epilogue leaves the f32 sum as it is (alpha 1, no C, no bias, no activation):
// epilogue_value is then the identity (1 * x is x, NaN included), and the kernels store the sum
// through a path without its per-element branches. Those branches, inlined for every
// accumulator, make the general store path tens of KiB of code per tile, more than the
// instruction cache holds; the plain GEMM should not fetch them.
SOL_SM90_HD bool epilogue_is_identity(const GemmEpilogueParams& e) {
  return e.alpha == 1.0f && e.beta == 0.0f && e.bias == nullptr && e.silu == 0;
}

// Which code a launch's stores run (one choice for the whole launch): identity, the sums as
// they are; linear, alpha, beta * C and bias without the activation; general, with silu, whose
// exp and IEEE division are most of epilogue_value's code when it is inlined per accumulator.
// So a residual add or a bias does not fetch silu's code for every element it stores.
enum class EpilogueForm : u32 { identity, linear, general };

SOL_SM90_HD EpilogueForm epilogue_form(const GemmEpilogueParams& e) {
  if (epilogue_is_identity(e)) return EpilogueForm::identity;
  return e.silu ? EpilogueForm::general : EpilogueForm::linear;
}

// The value of D at element `index` (= row * n + col) from the f32 sum `acc`, before rounding
// to D's dtype, by the code of form Form: the same value as epilogue_value wherever
// epilogue_form(e) is Form (or a later form).
template <EpilogueForm Form>
SOL_SM90_HD float epilogue_value_as(const GemmEpilogueParams& e, float acc, u64 index, u32 col) {
  if constexpr (Form == EpilogueForm::identity) {
    return acc;
  } else {
    float v = sol_cuda::mul_rn(e.alpha, acc);
    if (e.beta != 0.0f) {
      const float c = e.d_f32 ? static_cast<const float*>(e.c)[index]
                              : sol_cuda::bf16_to_float(static_cast<const u16*>(e.c)[index]);
      v = sol_cuda::fma_rn(c, e.beta, v);
    }
    if (e.bias) v = sol_cuda::add_rn(v, e.bias[col]);
    if constexpr (Form == EpilogueForm::general)
      if (e.silu) v = epilogue_silu(v);
    return v;
  }
}

SOL_SM90_HD float epilogue_value(const GemmEpilogueParams& e, float acc, u64 index, u32 col) {
  return epilogue_value_as<EpilogueForm::general>(e, acc, index, col);
}

}  // namespace sol::kernels::sm90
