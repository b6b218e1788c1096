// The scalar path (SOL_ISA=scalar, and avx2, which has no GEMM kernel of its own): one f32 sum
// per element in K order, then the epilogue. Slow and plainly right; rows split over threads.
#include <cmath>

#include "ops/common/parallel.h"
#include "ops/gemm/packing.h"

namespace sol::gemm_detail {

namespace {

float load(const void* base, DType t, int64_t i) {
  return t == DType::bf16 ? bf16_to_f32(static_cast<const uint16_t*>(base)[i])
                          : static_cast<const float*>(base)[i];
}

// Element (k, n) of B, from wherever it lives.
float load_b(const GemmProblem& p, int64_t k, int64_t n) {
  if (!p.packed) return load(p.b.data, p.in, p.b.offset(k, n));
  const int64_t nr = kernels::kGemmNR, col = n % nr;
  const void* panel = p.packed->at(0, n - col);
  return load(panel, p.in, p.in == DType::bf16 ? (k / 2) * 2 * nr + 2 * col + k % 2 : k * nr + col);
}

}  // namespace

void gemm_scalar(const GemmProblem& p) {
  const DType out = p.d_bf16 ? DType::bf16 : DType::f32;
  parallel_ranges(p.m, 1, [&](int64_t m0, int64_t m1) {
    for (int64_t i = m0; i < m1; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        float acc = 0.0f;
        for (int64_t k = 0; k < p.k; ++k) acc += load(p.a, p.in, i * p.lda + k) * load_b(p, k, j);
        float v = p.alpha * acc;
        if (p.beta != 0.0f) v += p.beta * load(p.c, out, i * p.ldc + j);
        if (p.bias) v += p.bias[j];
        if (p.silu) v = v / (1.0f + std::exp(-v));
        if (p.d_bf16) static_cast<uint16_t*>(p.d)[i * p.ldd + j] = f32_to_bf16(v);
        else static_cast<float*>(p.d)[i * p.ldd + j] = v;
      }
    }
  });
}

}  // namespace sol::gemm_detail
