// AVX2 rope: the scalar kernel's arithmetic (r = fma(v[p], s, v * c) per element, the head
// widened to f32 before any of it is written, so in place is safe) eight elements a vector,
// bit for bit the scalar results. The partner p is the neighbour within a pair (interleaved:
// a swap inside each 128-bit lane) or the element half a slice away (half: a second load,
// vectorized where d / 2 is a multiple of 8). No prefetching: the AVX-512 kernel's look-ahead
// is left to that level.
#include <immintrin.h>

#include <cmath>

#include "kernels/rope.h"
#include "kernels/x86/avx2/vec8_avx2.h"

namespace sol::kernels {

namespace {

void rotate(void* x, DType t, const float* c, const float* s, int64_t d, bool interleaved) {
  alignas(32) float v[512];  // rope_dim <= 512 is checked by the op
  int64_t i = 0;
  if (t == DType::bf16) {
    const uint16_t* in = static_cast<const uint16_t*>(x);
    for (; i + 8 <= d; i += 8) _mm256_store_ps(v + i, widen8_bf16(in + i));
    for (; i < d; ++i) v[i] = bf16_to_f32(in[i]);
  } else {
    for (; i < d; ++i) v[i] = static_cast<const float*>(x)[i];
  }
  const int64_t half = d / 2;
  const int64_t vector_end = interleaved ? d / 8 * 8 : (half % 8 == 0 ? d : 0);
  for (i = 0; i < vector_end; i += 8) {
    const __m256 vi = _mm256_load_ps(v + i);
    const __m256 vp = interleaved ? _mm256_permute_ps(vi, 0xB1) : _mm256_load_ps(v + (i + half) % d);
    const __m256 r = _mm256_fmadd_ps(vp, _mm256_loadu_ps(s + i), _mm256_mul_ps(vi, _mm256_loadu_ps(c + i)));
    store8(x, t, i, r);
  }
  for (; i < d; ++i) {
    const int64_t p = interleaved ? (i ^ 1) : (i + half) % d;
    const float r = std::fma(v[p], s[i], v[i] * c[i]);
    if (t == DType::bf16) static_cast<uint16_t*>(x)[i] = f32_to_bf16(r);
    else static_cast<float*>(x)[i] = r;
  }
}

}  // namespace

void rope_rotate_heads_avx2(void* x, DType t, int64_t head_stride, int64_t heads, const float* c, const float* s,
                            int64_t d, bool interleaved, const void*, const TuningParams&) {
  for (int64_t h = 0; h < heads; ++h) rotate(static_cast<char*>(x) + h * head_stride, t, c, s, d, interleaved);
}

}  // namespace sol::kernels
