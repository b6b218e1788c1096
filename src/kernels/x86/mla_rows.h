#pragma once
// The row walks of MLA decode's merge and finish, shared by the scalar and AVX-512 paths: which
// rows, the max and scale factors, empty rows, lse. The arithmetic on a row's 512 value columns
// stays with each path (the caller's lambda). Everything here has internal linkage, so each
// path's translation unit keeps its own copy, compiled with its own ISA flags: no AVX-512 code
// can stand in for the scalar path at link time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/x86/avx512/mla_chunk_avx512.h"

namespace sol::kernels {
namespace {

// Merges a second partial result (o2, row_max2, row_sum2) of rows [0, rows) into the first:
// both are rescaled to the larger max (NaN wins), combine(o_row, o2_row, a, b) sets
// o_row = o_row * a + o2_row * b over the kMlaDv columns. A row empty on both sides stays as it
// is (o 0, sum 0); exp(-inf) = 0 exactly, so an empty side contributes nothing.
template <class Combine>
void merge_rows(int64_t rows, float* o, float* row_max, float* row_sum, const float* o2, const float* row_max2,
                const float* row_sum2, Combine&& combine) {
  for (int64_t m = 0; m < rows; ++m) {
    const float m1 = row_max[m], m2 = row_max2[m];
    const float mx = std::isnan(m1) || m1 > m2 ? m1 : m2;
    if (mx == -std::numeric_limits<float>::infinity()) continue;
    const float a = std::exp(m1 - mx), b = std::exp(m2 - mx);
    combine(o + m * kMlaDv, o2 + m * kMlaDv, a, b);
    row_sum[m] = row_sum[m] * a + row_sum2[m] * b;
    row_max[m] = mx;
  }
}

// Finishes rows [f.row_begin, f.row_end) (see MlaFinish): scale_row(out_row, o_row, 1 / sum)
// writes a row's kMlaDv bf16 outputs; rows with sum 0 (they saw nothing) get zeros, lse -inf.
template <class ScaleRow>
void finish_rows(const MlaFinish& f, ScaleRow&& scale_row) {
  for (int64_t m = f.row_begin; m < f.row_end; ++m) {
    const int64_t i = m / f.heads, h = m % f.heads;
    uint16_t* out = f.out + i * f.out_stride_s + h * f.out_stride_h;
    float* lse = f.lse + h * f.lse_stride_h + i * f.lse_stride_s;
    const float sum = f.row_sum[m];
    if (sum == 0.0f) {
      std::fill(out, out + kMlaDv, uint16_t(0));
      *lse = -std::numeric_limits<float>::infinity();
      continue;
    }
    scale_row(out, f.o + m * kMlaDv, 1.0f / sum);
    *lse = f.row_max[m] + std::log(sum);
  }
}

}  // namespace
}  // namespace sol::kernels
