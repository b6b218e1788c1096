// AVX2 silu-mul: y = g / (1 + exp(-g)) * u, the scalar row's formula with exp8 (exp_avx2.h) for
// libm's exp: within a few f32 ulps of the scalar results, not their bits. exp8 saturates to
// inf from -g = 89 (g / inf = -0, silu's limit) and to ~0 below -104 (y = g u). GELU has no
// kernel of its own at this level (the table names the scalar one).
#include <cstring>

#include "kernels/activation.h"
#include "kernels/x86/avx2/exp_avx2.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {

namespace {

[[gnu::always_inline]] inline __m256 silu_times(__m256 g, __m256 u) {
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

}  // namespace

void silu_mul_avx2(const void* g, const void* u, DType t, void* y, DType yt, int64_t n, bool, const void*,
                   const TuningParams&) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(y, yt, i, silu_times(load8(g, t, i), load8(u, t, i)));
  if (i == n) return;
  // The last 1-7 elements through padded copies (zeros: silu(0) * 0 is 0, and not stored).
  const size_t size = t == DType::f32 ? 4 : 2, out_size = yt == DType::f32 ? 4 : 2, left = size_t(n - i);
  alignas(32) unsigned char gt[32] = {}, ut[32] = {}, yv[32];
  std::memcpy(gt, static_cast<const unsigned char*>(g) + size_t(i) * size, left * size);
  std::memcpy(ut, static_cast<const unsigned char*>(u) + size_t(i) * size, left * size);
  store8(yv, yt, 0, silu_times(load8(gt, t, 0), load8(ut, t, 0)));
  std::memcpy(static_cast<unsigned char*>(y) + size_t(i) * out_size, yv, left * out_size);
}

}  // namespace sol::kernels
