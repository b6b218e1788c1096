#pragma once
// The f32 exponential and sigmoid of Sol's AVX-512 kernels (exp16 in
// src/kernels/x86/avx512/vec16_avx512.h, sigmoid16 in sigmoid16_avx512.h), written once for
// device code and the host, so the device scores routing with the same bits as the CPU path.
// Each step is one IEEE operation, rounded once, as the vector instruction it mirrors:
//   n = rint(x * log2(e)) (product rounded first, as vmulps then vrndscaleps), r = x - n ln2 in
//   two FMAs (Cody-Waite), a degree-6 polynomial in FMAs, then p * 2^n (vscalefps: exact, one
//   rounding into the subnormals). x is clamped to [-104, 89] first; NaN passes through.
// Nothing here may be contracted or reassociated: the FMAs are explicit and no product feeds an
// addition, so neither -fmad nor the host compiler's contraction can change a result. Device
// NaNs are the canonical NaN where x86 keeps a payload: compare NaN as NaN, not by bits.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SOL_EXP_HD __host__ __device__ __forceinline__
#define SOL_EXP_FMA(a, b, c) __fmaf_rn(a, b, c)
#define SOL_EXP_RINT(x) rintf(x)
#define SOL_EXP_LDEXP(x, n) ldexpf(x, n)
#else
#include <cmath>
#define SOL_EXP_HD inline
#define SOL_EXP_FMA(a, b, c) std::fma(a, b, c)
#define SOL_EXP_RINT(x) std::nearbyint(x)
#define SOL_EXP_LDEXP(x, n) std::ldexp(x, n)
#endif

namespace sol_cuda {

SOL_EXP_HD float exp_f32(float x) {
  if (x != x) return x;
  x = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
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
  return SOL_EXP_LDEXP(p, int(n));
}

// 1 / (1 + exp(-x)), as sigmoid16 (0 - x, then the exponential, an add and a division).
SOL_EXP_HD float sigmoid_f32(float x) { return 1.0f / (1.0f + exp_f32(0.0f - x)); }

}  // namespace sol_cuda
