#pragma once
// 16-lane pieces shared by the AVX-512 routing kernels: order keys (kernels/route.h) and ranks.
// Include only from *_avx512.cc files; anonymous namespace, as vec16.
#include <climits>

#include "kernels/route.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {
namespace {

// Floats reordered as signed ints: a negative float's magnitude bits are flipped, so more
// negative floats give smaller ints. -0 would key below +0, but no selection score is -0:
// scores are +0 or more (or NaN), and a sum that is exactly zero rounds to +0.
[[gnu::always_inline]] inline __m512i key16(__m512 x) {
  const __m512i b = _mm512_castps_si512(x);
  const __m512i k = _mm512_xor_si512(b, _mm512_and_si512(_mm512_srai_epi32(b, 31), _mm512_set1_epi32(0x7FFFFFFF)));
  return _mm512_mask_mov_epi32(k, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_set1_epi32(kRouteNanKey));
}

// The float a key stands for, per lane (route_key_score; the NaN key reads back as a NaN).
[[gnu::always_inline]] inline __m512 score16(__m512i k) {
  return _mm512_castsi512_ps(_mm512_xor_si512(k, _mm512_and_si512(_mm512_srai_epi32(k, 31), _mm512_set1_epi32(0x7FFFFFFF))));
}

// Each lane's rank among the 16 lanes: how many lanes beat it, a lane beating another when
// its key is larger or equal with a lower lane (lanes are in increasing expert index). The
// rank of a present lane is the number of larger keys plus the number of equal keys in lower
// lanes. Usually the present keys are distinct: then counting the larger keys alone (one
// compare and one masked add per lane, the key broadcast from memory: a load, not a shuffle)
// gives each present lane a different count, 0 .. present - 1, and that is checked with one
// reduction; absent lanes hold INT_MIN, below every present key, and never count. With a tie
// among the present lanes, the full count with the index rule runs instead.
[[gnu::always_inline]] inline __m512i ranks16(__m512i v, __mmask16 present) {
  alignas(64) int32_t key[16];
  _mm512_store_si512(key, v);
  const __m512i one = _mm512_set1_epi32(1);
  __m512i larger = _mm512_setzero_si512();
  for (int i = 0; i < 16; ++i)
    larger = _mm512_mask_add_epi32(larger, _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(key[i]), v), larger, one);
  const uint32_t seen = uint32_t(_mm512_reduce_or_epi32(_mm512_maskz_sllv_epi32(present, one, larger)));
  if (seen == (1u << __builtin_popcount(present)) - 1) return larger;
  __m512i beaten_by = _mm512_setzero_si512();
  for (int i = 0; i < 16; ++i) {
    const __m512i b = _mm512_set1_epi32(key[i]);
    const __mmask16 wins = _mm512_cmpgt_epi32_mask(b, v) | (_mm512_cmpeq_epi32_mask(b, v) & __mmask16(0xFFFEu << i));
    beaten_by = _mm512_mask_add_epi32(beaten_by, wins, beaten_by, one);
  }
  return beaten_by;
}

// The k-th largest of 16 lanes (1 <= k <= 16): the minimum over the lanes ranked below k.
[[maybe_unused, gnu::always_inline]] inline int32_t kth_largest(__m512i v, int64_t k) {
  const __mmask16 top = _mm512_cmplt_epi32_mask(ranks16(v, __mmask16(0xFFFF)), _mm512_set1_epi32(int32_t(k)));
  return _mm512_mask_reduce_min_epi32(top, v);
}

}  // namespace
}  // namespace sol::kernels
