// AVX2 softmax row: the scalar row's steps (the maximum, NaN rows kept NaN; exponentials into
// scratch summed in 16 partial sums, element i into sum i % 16, combined in order; one
// reciprocal and a multiply per element) eight lanes at a time, with exp8 (exp_avx2.h) for
// libm's exp: within a few f32 ulps of it, not its bits. exp8 is exactly 0 from its clamp (-104)
// down, so a masked -inf gives 0 as libm's exp does.
#include <cmath>
#include <cstring>

#include "kernels/softmax.h"
#include "kernels/x86/avx2/exp_avx2.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {

namespace {


}  // namespace

void softmax_row_avx2(const void* x, DType t, void* y, DType yt, int64_t n, float* scratch, bool,
                      const TuningParams&) {
  // Whole vectors, then the last 1-7 elements through a padded copy: the -inf pads leave the
  // maximum as it is, and their exponentials (0) are not stored.
  const int64_t whole = n / 8 * 8;
  const size_t size = t == DType::f32 ? 4 : 2, left = size_t(n - whole);
  alignas(32) unsigned char tail[32];
  const uint32_t minus_inf = t == DType::f32 ? 0xFF800000u : 0xFF80FF80u;  // one f32, or two bf16
  for (int k = 0; k < 8; ++k) std::memcpy(tail + 4 * k, &minus_inf, 4);
  std::memcpy(tail, static_cast<const unsigned char*>(x) + size_t(whole) * size, left * size);

  __m256 mx = _mm256_set1_ps(-INFINITY), nan = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 v = i < whole ? load8(x, t, i) : load8(tail, t, 0);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    mx = _mm256_max_ps(mx, v);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mx);
  float m = -INFINITY;
  for (float l : lanes) m = l > m ? l : m;
  if (!_mm256_testz_ps(nan, nan)) m = NAN;
  const __m256 mv = _mm256_set1_ps(m);

  // Partial sums 0-7 in s0, 8-15 in s1: element i goes to sum i % 16, as in the scalar row.
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(i < whole ? load8(x, t, i) : load8(tail, t, 0), mv));
    if (i < whole) {
      _mm256_storeu_ps(scratch + i, e);
    } else {
      alignas(32) float last[8];
      _mm256_store_ps(last, e);
      std::memcpy(scratch + i, last, left * sizeof(float));
    }
    if ((i / 8) % 2 == 0) s0 = _mm256_add_ps(s0, e);
    else s1 = _mm256_add_ps(s1, e);
  }
  alignas(32) float part[16];
  _mm256_store_ps(part, s0);
  _mm256_store_ps(part + 8, s1);
  float sum = 0;
  for (float p : part) sum += p;
  const float inv = 1.0f / sum;
  const __m256 iv = _mm256_set1_ps(inv);
  int64_t i = 0;
  for (; i < whole; i += 8) store8(y, yt, i, _mm256_mul_ps(_mm256_loadu_ps(scratch + i), iv));
  for (; i < n; ++i) {
    const float v = scratch[i] * inv;
    if (yt == DType::bf16) static_cast<uint16_t*>(y)[i] = f32_to_bf16(v);
    else static_cast<float*>(y)[i] = v;
  }
}

}  // namespace sol::kernels
