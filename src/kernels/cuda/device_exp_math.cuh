#pragma once
// The f32 exponential and sigmoid of Sol's AVX-512 kernels (exp16 in
// src/kernels/x86/avx512/vec16_avx512.h, sigmoid16 in sigmoid16_avx512.h), written once for
// device code and the host, so the device scores routing with the same bits as the CPU path
// (the scalar CPU sigmoid, kernels/x86/sigmoid_scalar.cc, is this one too).
// Each step is one IEEE operation, rounded once, as the vector instruction it mirrors:
//   n = rint(x * log2(e)) (product rounded first, as vmulps then vrndscaleps), r = x - n ln2 in
//   two FMAs (Cody-Waite), a degree-6 polynomial in FMAs, then p * 2^n (vscalefps: exact, one
//   rounding into the subnormals). x is clamped to [-104, 89] first; NaN passes through.
// p * 2^n is scale_pow2 below: ldexp's bits in ~5 instructions where the device's ldexpf takes
// ~15 and a branch.
// Nothing here may be contracted or reassociated: the FMAs and the scaling multiplies are
// explicit, so neither -fmad nor the host compiler's contraction can change a result (nor fold
// the last multiply into a caller's sum). Device NaNs are the canonical NaN where x86 keeps a
// payload: compare NaN as NaN, not by bits.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SOL_EXP_HD __host__ __device__ __forceinline__
#define SOL_EXP_FMA(a, b, c) __fmaf_rn(a, b, c)
#define SOL_EXP_RINT(x) rintf(x)
#define SOL_EXP_MUL(a, b) __fmul_rn(a, b)
#define SOL_EXP_FLOAT_OF_BITS(b) __uint_as_float(b)
#else
#include <cmath>
#define SOL_EXP_HD inline
#define SOL_EXP_FMA(a, b, c) std::fma(a, b, c)
#define SOL_EXP_RINT(x) std::nearbyint(x)
#define SOL_EXP_MUL(a, b) ((a) * (b))
#define SOL_EXP_FLOAT_OF_BITS(b) __builtin_bit_cast(float, b)
#endif

namespace sol_cuda {

// 2^e for a normal exponent e in [-126, 127].
SOL_EXP_HD float pow2_normal(int e) { return SOL_EXP_FLOAT_OF_BITS(unsigned(e + 127) << 23); }

// ldexp(p, n) for p in [0.5, 2) and n in [-150, 128] (what exp_f32's clamp allows): p * 2^(n -
// h) is exact (n - h >= -75 keeps it normal), then * 2^h (h = floor(n / 2)) is the one
// rounding, into the subnormals or to infinity as ldexp's.
SOL_EXP_HD float scale_pow2(float p, int n) {
  const int h = n >> 1;
  return SOL_EXP_MUL(SOL_EXP_MUL(p, pow2_normal(n - h)), pow2_normal(h));
}

SOL_EXP_HD float exp_f32(float in) {
  const bool nan = in != in;
  // A NaN is computed as 0 (no float-to-int conversion of NaN) and returned as itself: selects,
  // not a branch, so a warp never diverges on it.
  const float x = nan ? 0.0f : (in < -104.0f ? -104.0f : (in > 89.0f ? 89.0f : in));
  const float n = SOL_EXP_RINT(x * 1.44269504088896341f);
  float r = SOL_EXP_FMA(-n, 0.693145751953125f, x);
  r = SOL_EXP_FMA(-n, 1.428606765330187e-06f, r);
  float p = 1.0f / 720;
  p = SOL_EXP_FMA(p, r, 1.0f / 120);
  p = SOL_EXP_FMA(p, r, 1.0f / 24);
  p = SOL_EXP_FMA(p, r, 1.0f / 6);
  p = SOL_EXP_FMA(p, r, 0.5f);
  p = SOL_EXP_FMA(p, r, 1.0f);
  p = SOL_EXP_FMA(p, r, 1.0f);
  const float e = scale_pow2(p, int(n));
  return nan ? in : e;
}

// 1 / (1 + exp(-x)), as sigmoid16 (0 - x, then the exponential, an add and a division).
SOL_EXP_HD float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(0.0f - x)); }

}  // namespace sol_cuda
