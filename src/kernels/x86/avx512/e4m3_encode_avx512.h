#pragma once
// e4m3 codes of bf16 values times a group's multiplier, 64 at a time, by ONE branch-free path
// for every finite product: normals, e4m3 subnormals and zeros alike. Include only from
// *_avx512.cc files; anonymous namespace.
//
// Why: the token quantizer (quant_avx512.cc) encodes normal results on 16-bit lanes and sends
// a whole 64-element block to an exact but ~3x slower encoder when one product falls below
// e4m3's normal range (2^-6). Activation outputs do that often: GELU's negative tail and
// silu(g) * u near zero are tiny beside the group's maximum; on the benchmarks' uniform
// [-6, 6] inputs ~18% of gelu's outputs land there, so practically every block took the slow
// encoder (docs/perf/layer-ops.md).
//
// The rounding: p = x * m (f32, rounded once, as the reference does), |p| <= 448 (1 + 2^-22).
// With E = max(exponent(p), -6), C = sign(p) 2^(E + 20) has an ulp of 2^(E - 3), e4m3's
// spacing in p's binade (2^-9 below 2^-6), so s = p + C rounds p to e4m3's grid in one f32
// rounding to nearest even (ties to even on the sum are ties to even on the code: C is an even
// multiple of that ulp). Then r = s 2^-8 - C 2^-8 = p' 2^-8 is exact and a normal f32, and
// exactly an fp16: 2^-8 moves e4m3's exponent bias (7) onto fp16's (15), so the fp16 bits of
// r, shifted right by 7, are |p'|'s e4m3 code for normals and (through fp16's gradual
// underflow: e4m3's subnormals k 2^-9 become fp16's k 2^-17) for subnormals.
// No f32 subnormal is made on the way: on Intel cores every vector op that makes or reads one
// takes a microcode assist of ~100+ cycles. vcvtps2ph's own fp16 subnormals take none.
// The exact conversion still needs MXCSR's flush-to-zero off (the default), which callers check
// (kernels::mxcsr_keeps_subnormals).
#include <cstdint>

#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {
namespace {

struct E4m3Encoder {
  __m512i sign_exp = _mm512_set1_epi32(int(0xFF800000u));  // sign and exponent of an f32
  __m512 min_normal = _mm512_set1_ps(0x1p-6f);             // e4m3's smallest normal
  __m512i to_c_low = _mm512_set1_epi32(12 << 23);          // 2^E -> 2^(E + 12) = C 2^-8
  __m512 two20 = _mm512_set1_ps(0x1p20f), two_m8 = _mm512_set1_ps(0x1p-8f);
  __m512i hi16 = _mm512_set1_epi32(int(0xFFFF0000u)), w7f = _mm512_set1_epi16(0x7F);
  __m512i exp16 = _mm512_set1_epi16(0x7F80);  // a bf16's exponent
  // Words 0..15 (even elements) and 16..31 (odd ones) back into element order.
  __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                        21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  __m512i line_order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
};

// fp16 bits of r = p' 2^-8 for 16 values v (f32) times mv: code << 7, sign at bit 15.
[[gnu::always_inline]] inline __m256i e4m3_half_bits(__m512 v, __m512 mv, const E4m3Encoder& k) {
  const __m512 p = _mm512_mul_ps(v, mv);
  // t = sign(p) 2^max(E, -6): vrangeps picks the larger magnitude with the first operand's sign.
  const __m512 t = _mm512_range_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(p), k.sign_exp)),
                                   k.min_normal, 0x03);
  const __m512 s = _mm512_fmadd_ps(t, k.two20, p);  // p + C, rounded to e4m3's grid
  const __m512 c_low = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(t), k.to_c_low));  // C 2^-8
  return _mm512_cvtps_ph(_mm512_fmsub_ps(s, k.two_m8, c_low), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// 32 bf16 (element order) times mv -> 32 code words (code in the low byte, high byte 0).
// A bf16 subnormal x enters as 0: its product (below 2^-133 times a multiplier of at most
// 448 / 1e-4) is far under e4m3's half-ulp, so its code is a zero either way, and the sign comes
// from w; reading it as a subnormal f32 would take the assist.
[[gnu::always_inline]] inline __m512i e4m3_codes32(__m512i w, __m512 mv, const E4m3Encoder& k) {
  const __m512i wn = _mm512_maskz_mov_epi16(_mm512_test_epi16_mask(w, k.exp16), w);
  const __m512 even = _mm512_castsi512_ps(_mm512_slli_epi32(wn, 16));
  const __m512 odd = _mm512_castsi512_ps(_mm512_and_si512(wn, k.hi16));
  const __m512i halves = _mm512_inserti64x4(_mm512_castsi256_si512(e4m3_half_bits(even, mv, k)),
                                            e4m3_half_bits(odd, mv, k), 1);
  const __m512i n = _mm512_srli_epi16(_mm512_permutexvar_epi16(k.interleave, halves), 7);
  // The sign from x, not from r: a negative product that rounds to zero gives r = +0 (s 2^-8 -
  // C 2^-8 cancels exactly), while its code is -0 (0x80).
  return _mm512_ternarylogic_epi32(n, _mm512_srli_epi16(w, 8), k.w7f, 0xE4);  // (n & 0x7F) | w's sign at bit 7
}

// 64 bf16 at x (element order) times mv -> their 64 codes, in order.
[[gnu::always_inline]] inline __m512i e4m3_line64(const uint16_t* x, __m512 mv, const E4m3Encoder& k) {
  const __m512i c0 = e4m3_codes32(_mm512_loadu_si512(x), mv, k);
  const __m512i c1 = e4m3_codes32(_mm512_loadu_si512(x + 32), mv, k);
  // packus works per 128-bit lane: qword 2l holds c0's words 8l.., qword 2l + 1 c1's.
  return _mm512_permutexvar_epi64(k.line_order, _mm512_packus_epi16(c0, c1));
}

// One line of 64 codes at q: streamed (kStream; q 64-byte aligned) or stored.
template <bool kStream> [[gnu::always_inline]] inline void store_code_line(uint8_t* q, __m512i line) {
  if constexpr (kStream) _mm512_stream_si512(reinterpret_cast<__m512i*>(q), line);
  else _mm512_storeu_si512(q, line);
}

}  // namespace
}  // namespace sol::kernels
