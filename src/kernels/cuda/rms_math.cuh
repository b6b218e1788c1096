#pragma once
// RMSNorm's arithmetic in the CPU path's exact order (src/kernels/norm.h), for the device kernels
// and the host test that compares it with the CPU path (tests/device/test_cuda_rms_math.cc):
//   sum of squares: 64 partial sums, each a chain of FMAs over its own elements in row order;
//   element i of a block of 64 goes to partial i % 64 for f32 rows, and to
//   16 (2 (j / 32) + j % 2) + (j % 32) / 2 for bf16 rows (the AVX-512 path's even/odd widening);
//   partials k, k + 16, k + 32, k + 48 combine as (p0 + p1) + (p2 + p3), then the 16 results
//   in order. So the device's statistics, and with them every output, are the CPU's bit for bit.
//   inv = 1 / sqrt(ss / n + eps); y = round_y((x * inv) * w).
#include "kernels/cuda/float_ops.cuh"

namespace sol_cuda {

// The element (within each block of 64) that feeds partial sum k.
SOL_HD int rms_partial_element(int k, bool bf16) {
  if (!bf16) return k;
  const int a = k / 16, lane = k % 16;
  return 32 * (a / 2) + 2 * lane + a % 2;
}

// Partial sum k of a row of n elements, x(i) giving element i as f32.
template <class Element>
SOL_HD float rms_partial(int k, bool bf16, long long n, const Element& x) {
  float p = 0.0f;
#if defined(__CUDA_ARCH__)
#pragma unroll 8  // the loads run ahead of the FMA chain
#endif
  for (long long i = rms_partial_element(k, bf16); i < n; i += 64) {
    const float v = x(i);
    p = fma_rn(v, v, p);
  }
  return p;
}

SOL_HD float rms_combine(const float* partials) {
  float s = 0.0f;
  for (int k = 0; k < 16; ++k)
    s = add_rn(s, add_rn(add_rn(partials[k], partials[16 + k]), add_rn(partials[32 + k], partials[48 + k])));
  return s;
}

SOL_HD float rms_inverse(float sum_squares, long long n, float eps) {
  return div_rn(1.0f, sqrt_rn(add_rn(div_rn(sum_squares, ll_to_float(n)), eps)));
}

SOL_HD float rms_apply(float x, float inv, float w) { return mul_rn(mul_rn(x, inv), w); }

}  // namespace sol_cuda
