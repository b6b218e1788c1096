// out = sum_j w[j] rows[j] over bf16 rows, accumulated in f32 in the order given, rounded once
// to bf16, eight lanes at a time: multiply then add (ISA files are built without contraction,
// cmake/SolIsaFlags.cmake), so the bits are the portable loop's.
#include <immintrin.h>

#include "kernels/weighted_sum.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {

void weighted_sum_bf16_avx2(uint16_t* out, const uint16_t* const* rows, const float* weights, int count, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int j = 0; j < count; ++j) acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(weights[j]), widen8_bf16(rows[j] + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), narrow8_bf16(acc));
  }
  if (i == n) return;
  __m256 acc = _mm256_setzero_ps();
  for (int j = 0; j < count; ++j)
    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(weights[j]), load8_n(rows[j], DType::bf16, i, n - i)));
  store8_n(out, DType::bf16, i, n - i, acc);
}

}  // namespace sol::kernels
