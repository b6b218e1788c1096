#pragma once
// f32 arithmetic whose every rounding is spelled out, shared by device code and the host tests
// that compare it with the CPU path. On the device each operation is its _rn intrinsic, so
// NVRTC/nvcc cannot contract a multiply and an add into one FMA (the CPU path rounds them
// separately) nor trade a division for a reciprocal. On the host they are the plain IEEE
// operations (the host build of these headers has no FMA contraction: no -mfma).
// The two narrowing conversions the kernels do per element use the hardware's cvt on the
// device (cvt.rn.bf16x2.f32, cvt.rn.satfinite.e4m3x2.f32: round to nearest even, subnormals
// kept, e4m3 saturating to +-448 as the spec does) and the integer spec (convert_math.cuh)
// on the host; the two agree on every non-NaN input (PTX ISA, cvt), which the gpu tests check
// against the CPU path. NaN results carry no promised payload.
#include "kernels/cuda/convert_math.cuh"

namespace sol_cuda {

SOL_HD u32 bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  u32 b;
  __builtin_memcpy(&b, &f, 4);
  return b;
#endif
}
SOL_HD float float_of(u32 b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float f;
  __builtin_memcpy(&f, &b, 4);
  return f;
#endif
}
SOL_HD bool is_nan_bits(u32 b) { return (b & 0x7fffffffu) > 0x7f800000u; }

SOL_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SOL_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
SOL_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
SOL_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}
SOL_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return __builtin_sqrtf(a);
#endif
}
// (float)n rounded to nearest even, as the CPU path's float(int64_t).
SOL_HD float ll_to_float(long long n) {
#if defined(__CUDA_ARCH__)
  return __ll2float_rn(n);
#else
  return float(n);
#endif
}

SOL_HD float bf16_to_float(u16 b) { return float_of(u32(b) << 16); }

// Two f32 values rounded to bf16, packed lo | hi << 16.
SOL_HD u32 bf16x2_of(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  u32 packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
#else
  return u32(narrow_from_f32<kBF16>(bits_of(lo))) | u32(narrow_from_f32<kBF16>(bits_of(hi))) << 16;
#endif
}
SOL_HD u16 bf16_of(float f) { return u16(bf16x2_of(f, 0.0f)); }

// Two f32 values rounded to e4m3 (saturating), packed lo | hi << 8.
SOL_HD u32 e4m3x2_of(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  unsigned short packed;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(hi), "f"(lo));
  return packed;
#else
  return u32(narrow_from_f32<kE4M3>(bits_of(lo))) | u32(narrow_from_f32<kE4M3>(bits_of(hi))) << 8;
#endif
}

}  // namespace sol_cuda
