// The scalar path (SOL_ISA=scalar): one sum per
// element in K order, then the epilogue. Slow and plainly right; rows split over threads.
// Floats sum in f32 (fp8: per 128-wide group, then scaled and added, as the kernels do);
// integers sum exactly in int64 and wrap to int32 as the kernels' modular sums do.
#include <cmath>

#include "core/parallel.h"
#include "ops/gemm/packing.h"

namespace sol::gemm_detail {

namespace {

float load(const void* base, DType t, int64_t i) {
  switch (t) {
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::f8e4m3: return e4m3_to_f32(static_cast<const uint8_t*>(base)[i]);
    case DType::i8: return static_cast<const int8_t*>(base)[i];
    case DType::u8: return static_cast<const uint8_t*>(base)[i];
    default: return static_cast<const float*>(base)[i];
  }
}

// Element (k, n) of B, from wherever it lives (a packed panel keeps pairs or quads of K).
float load_b(const GemmProblem& p, int64_t k, int64_t n) {
  if (!p.packed) return load(p.b.data, p.b_type, p.b.offset(k, n));
  const int64_t nr = kernels::kGemmNR, col = n % nr, g = k_group(p.in);
  const void* panel = p.packed->at(0, n - col);
  return load(panel, p.packed->dtype, (k / g) * g * nr + g * col + k % g);
}

int64_t integer_sum(const GemmProblem& p, int64_t i, int64_t j) {
  int64_t acc = 0;
  for (int64_t k = 0; k < p.k; ++k)
    acc += int64_t(load(p.a, p.a_type, i * p.lda + k)) * int64_t(load_b(p, k, j));
  return acc;
}

float float_sum(const GemmProblem& p, int64_t i, int64_t j) {
  if (!p.b_scales) {
    float acc = 0.0f;
    for (int64_t k = 0; k < p.k; ++k) acc += load(p.a, p.a_type, i * p.lda + k) * load_b(p, k, j);
    return acc;
  }
  float total = 0.0f;
  for (int64_t g = 0; g < p.k / kFp8ScaleBlock; ++g) {
    float acc = 0.0f;
    for (int64_t k = g * kFp8ScaleBlock; k < (g + 1) * kFp8ScaleBlock; ++k)
      acc += load(p.a, p.a_type, i * p.lda + k) * load_b(p, k, j);
    const float sa = p.a_scales ? p.a_scales[i * p.lds_a + g] : 1.0f;
    total += acc * (sa * p.b_scales[(j / kFp8ScaleBlock) * p.lds_b + g]);
  }
  return total;
}

}  // namespace

void gemm_scalar(const GemmProblem& p) {
  const DType out = p.d_bf16 ? DType::bf16 : DType::f32;
  parallel_ranges(p.m, 1, [&](int64_t m0, int64_t m1) {
    for (int64_t i = m0; i < m1; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        if (p.in == DType::i8) {
          uint32_t v = uint32_t(integer_sum(p, i, j));
          if (p.beta != 0.0f) v += uint32_t(static_cast<const int32_t*>(p.c)[i * p.ldc + j]);
          static_cast<int32_t*>(p.d)[i * p.ldd + j] = int32_t(v);
          continue;
        }
        float v = p.alpha * float_sum(p, i, j);
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
