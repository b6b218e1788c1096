// Engram row sources, 8 indices per AVX-512 register (kernels/engram_rows.h): the scalar
// owner()'s reciprocal quotient, raised by one where it fell short, in 64-bit lanes, and the
// owner's origin fetched with a gather. (The masked forms of the widening load and the gather
// keep GCC 12 from warning about the unmasked intrinsics' undefined pass-through operand.)
#include <immintrin.h>

#include "kernels/engram_rows.h"

namespace sol::engram::detail {

void row_sources_avx512(const RowMap& m, const int32_t* idx, int64_t n, const char** sources) {
  const __m512i split = _mm512_set1_epi64(m.split), big = _mm512_set1_epi64(m.base + 1);
  const __m512i base = _mm512_set1_epi64(m.base), extra = _mm512_set1_epi64(m.extra);
  const __m512i row_bytes = _mm512_set1_epi64(int64_t(m.row_bytes)), one = _mm512_set1_epi64(1);
  const __m512d inv_big = _mm512_set1_pd(m.inv_big), inv_base = _mm512_set1_pd(m.inv_base);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512i row = _mm512_maskz_cvtepi32_epi64(0xFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx + i)));
    const __mmask8 low = _mm512_cmplt_epi64_mask(row, split);
    const __m512i num = _mm512_mask_mov_epi64(_mm512_sub_epi64(row, split), low, row);
    const __m512i den = _mm512_mask_mov_epi64(base, low, big);
    const __m512d inv = _mm512_mask_mov_pd(inv_base, low, inv_big);
    __m512i q = _mm512_cvttpd_epi64(_mm512_mul_pd(_mm512_cvtepi64_pd(num), inv));
    const __mmask8 short_by_one = _mm512_cmple_epi64_mask(_mm512_mullo_epi64(_mm512_add_epi64(q, one), den), num);
    q = _mm512_mask_add_epi64(q, short_by_one, q, one);
    const __m512i owner = _mm512_mask_mov_epi64(_mm512_add_epi64(q, extra), low, q);
    const __m512i origin = _mm512_mask_i64gather_epi64(_mm512_setzero_si512(), 0xFF, owner, m.origin, 8);
    _mm512_storeu_si512(sources + i, _mm512_add_epi64(origin, _mm512_mullo_epi64(row, row_bytes)));
  }
  row_sources_scalar(m, idx + i, n - i, sources + i);
}

}  // namespace sol::engram::detail
