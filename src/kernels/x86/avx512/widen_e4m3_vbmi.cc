// e4m3 -> bf16 widening by VBMI byte tables (GemmKernels::widen_e4m3 of the amx level and of
// the avx512 level's VBMI variant): the drivers widen each packed fp8 B panel with it before
// the tiles read the panel.
#include "kernels/x86/avx512/e4m3x64_avx512.h"  // first: see its include of e4m3_avx512.h
#include "kernels/gemm.h"

namespace sol::kernels {

void widen_e4m3_vbmi(const void* src, uint16_t* dst, int64_t n) {
  const auto* in = static_cast<const uint8_t*>(src);
  int64_t i = 0;
  __m512i out[2];
  for (; i + 64 <= n; i += 64) {
    e4m3x64_to_bf16(_mm512_loadu_si512(in + i), out);
    _mm512_storeu_si512(dst + i, out[0]);
    _mm512_storeu_si512(dst + i + 32, out[1]);
  }
  if (i < n) {  // the tail: masked, nothing read or written past n
    const int64_t left = n - i;
    e4m3x64_to_bf16(_mm512_maskz_loadu_epi8(_cvtu64_mask64(~uint64_t(0) >> (64 - left)), in + i), out);
    const __mmask32 first = left >= 32 ? ~__mmask32(0) : __mmask32((uint64_t(1) << left) - 1);
    const __mmask32 second = left > 32 ? __mmask32((uint64_t(1) << (left - 32)) - 1) : 0;
    _mm512_mask_storeu_epi16(dst + i, first, out[0]);
    _mm512_mask_storeu_epi16(dst + i + 32, second, out[1]);
  }
}

}  // namespace sol::kernels
