#pragma once
// sigmoid of 16 lanes, 1 / (1 + exp(-x)): the one formula of the AVX-512 sigmoid row and of the
// fused routing kernel, so both give the same bits (the routing reference scores rows with
// the row kernel). Include only from *_avx512.cc files.
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {
namespace {
[[gnu::always_inline]] inline __m512 sigmoid16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}
}  // namespace
}  // namespace sol::kernels
