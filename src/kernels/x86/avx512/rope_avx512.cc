// AVX-512 rope rotation (helpers in vec16_avx512.h). The slice is read whole before anything is
// written (d <= 512 floats in registers/stack), as every output needs its partner's old value.
#include <cstring>

#include "kernels/rope.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {

void rope_rotate_avx512(void* x, DType t, const float* c, const float* s, int64_t d, bool interleaved) {
  alignas(64) float v[512 + 16], partner[512 + 16];
  for (int64_t i = 0; i < d; i += 16) _mm512_store_ps(v + i, load16(x, t, i, tail_mask(d - i)));
  if (!interleaved) {  // partner[i] = v[(i + d/2) mod d]: the two halves swapped
    std::memcpy(partner, v + d / 2, sizeof(float) * size_t(d - d / 2));
    std::memcpy(partner + (d - d / 2), v, sizeof(float) * size_t(d / 2));
  }
  for (int64_t i = 0; i < d; i += 16) {
    __mmask16 m = tail_mask(d - i);
    __m512 xv = _mm512_load_ps(v + i);
    // Interleaved pairs are neighbours (d is even, blocks start at even lanes): swap within
    // each pair. Half pairs are d/2 apart: read the swapped copy.
    __m512 pv = interleaved ? _mm512_permute_ps(xv, 0xB1) : _mm512_load_ps(partner + i);
    __m512 r = _mm512_fmadd_ps(pv, _mm512_maskz_loadu_ps(m, s + i), _mm512_mul_ps(xv, _mm512_maskz_loadu_ps(m, c + i)));
    store16(x, t, i, m, r);
  }
}

}  // namespace sol::kernels
