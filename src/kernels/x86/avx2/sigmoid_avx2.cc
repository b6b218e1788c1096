// AVX2 sigmoid row: sigmoid8 (exp_avx2.h), the scalar row's bits (routing scores, and with them
// the weights, agree on every path). The tail goes through a padded vector: the scalar
// sigmoid's inline header is not included here, where the linker could hand its AVX2 build to
// baseline code.
#include <cstring>

#include "kernels/sigmoid.h"
#include "kernels/x86/avx2/exp_avx2.h"

namespace sol::kernels {

namespace {

[[gnu::always_inline]] inline __m256 load8(const void* x, DType t, int64_t i) {
  if (t == DType::f32) return _mm256_loadu_ps(static_cast<const float*>(x) + i);
  const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(x) + i));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
}

}  // namespace

void sigmoid_row_avx2(const void* x, DType t, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, sigmoid8(load8(x, t, i)));
  if (i == n) return;
  const size_t size = t == DType::f32 ? 4 : 2, left = size_t(n - i);
  alignas(32) unsigned char in[32] = {};
  alignas(32) float result[8];
  std::memcpy(in, static_cast<const unsigned char*>(x) + size_t(i) * size, left * size);
  _mm256_store_ps(result, sigmoid8(load8(in, t, 0)));
  std::memcpy(out + i, result, left * sizeof(float));
}

}  // namespace sol::kernels
