#pragma once
// One validated GEMM call, as the blocked and the scalar paths both see it: raw pointers,
// leading dimensions in elements, and where B comes from (a plain matrix or a PackedMatrix).
#include <cstdint>

#include "sol/dtype.h"
#include "sol/gemm.h"

namespace sol::gemm_detail {

// A plain B: element (k, n) lives at k * ld + n (nn) or n * ld + k (nt).
struct PlainB {
  const void* data = nullptr;
  int64_t ld = 0;
  Layout layout = Layout::nn;
  int64_t offset(int64_t k, int64_t n) const { return layout == Layout::nn ? k * ld + n : n * ld + k; }
};

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0;
  DType in = DType::f32;  // A and B
  const void* a = nullptr;
  int64_t lda = 0;
  PlainB b;                                     // used when packed is null
  const PackedMatrix::Impl* packed = nullptr;
  void* d = nullptr;
  int64_t ldd = 0;
  bool d_bf16 = false;
  const void* c = nullptr;  // D's dtype; equals d when C is D's old contents
  int64_t ldc = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;
  bool silu = false;

  bool c_is_d() const { return beta != 0.0f && c == d; }
};

void gemm_blocked_avx512(const GemmProblem& p);
void gemm_scalar(const GemmProblem& p);

}  // namespace sol::gemm_detail
