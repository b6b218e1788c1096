#pragma once
// Exact e4m3 -> bf16 widening, 64 values at a time, by two byte tables of the 128 magnitudes
// (VPERMT2B reads an index's low 7 bits, so the sign bit needs no mask): the high and the low
// byte of each bf16 looked up, the sign put back into the high byte, the bytes interleaved into
// words. About half the shuffle-port work per value of e4m3_avx512.h's word-table path
// (VPERMT2W twice per 32 values), which bound the fp8 paths. Translation units compiled with
// VBMI (the amx level, and the avx512 level's _vbmi.cc variants) get the byte tables; the
// others (the plain avx512 level, the tile model) the word-table path, with the same bits.
// e4m3_avx512.h comes first: it includes <immintrin.h> with GCC 12's spurious
// -Wmaybe-uninitialized (bug 105593) silenced, which must happen before anything else includes it.
#include "kernels/x86/avx512/e4m3_avx512.h"

#include <cstdint>

#include "kernels/e4m3_bf16_table.h"

namespace sol::kernels {
namespace {

#ifdef __AVX512VBMI__
struct alignas(64) E4m3ByteTables {
  uint8_t low[128], high[128];
};
constexpr E4m3ByteTables make_e4m3_byte_tables() {
  E4m3ByteTables t{};
  for (int m = 0; m < 128; ++m) {
    t.low[m] = uint8_t(kE4m3ToBf16.bits[m] & 0xFF);
    t.high[m] = uint8_t(kE4m3ToBf16.bits[m] >> 8);
  }
  return t;
}
inline constexpr E4m3ByteTables kE4m3Bytes = make_e4m3_byte_tables();

// The unpacks interleave within 128-bit lanes, so lane L of the shuffled input holds values
// 8L..8L+7 then 32+8L..32+8L+7: the low unpack is then values 0..31 in order, the high 32..63.
alignas(64) inline constexpr uint8_t kE4m3LaneOrder[64] = {
    0,  1,  2,  3,  4,  5,  6,  7,  32, 33, 34, 35, 36, 37, 38, 39, 8,  9,  10, 11, 12, 13,
    14, 15, 40, 41, 42, 43, 44, 45, 46, 47, 16, 17, 18, 19, 20, 21, 22, 23, 48, 49, 50, 51,
    52, 53, 54, 55, 24, 25, 26, 27, 28, 29, 30, 31, 56, 57, 58, 59, 60, 61, 62, 63};
#endif

// 64 e4m3 bytes -> 64 bf16: out[0] values 0..31, out[1] values 32..63.
[[gnu::always_inline]] inline void e4m3x64_to_bf16(__m512i bytes, __m512i (&out)[2]) {
#ifdef __AVX512VBMI__
  const auto* low = reinterpret_cast<const __m512i*>(kE4m3Bytes.low);
  const auto* high = reinterpret_cast<const __m512i*>(kE4m3Bytes.high);
  const __m512i x = _mm512_permutexvar_epi8(_mm512_load_si512(kE4m3LaneOrder), bytes);
  const __m512i lo = _mm512_permutex2var_epi8(low[0], x, low[1]);
  // high | (x & 0x80)
  const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(high[0], x, high[1]), x,
                                               _mm512_set1_epi8(char(0x80)), 0xF8);
  out[0] = _mm512_unpacklo_epi8(lo, hi);
  out[1] = _mm512_unpackhi_epi8(lo, hi);
#else
  out[0] = e4m3x32_to_bf16(_mm512_castsi512_si256(bytes));
  out[1] = e4m3x32_to_bf16(_mm512_extracti64x4_epi64(bytes, 1));
#endif
}

}  // namespace
}  // namespace sol::kernels
