#pragma once
// The e4m3 encoders of 64 bf16 values times a group's multiplier, shared by the quantizers
// (quant_avx512.cc) and the activations fused with quantization (activation_avx512.cc):
// quant64_bf16 and what it is built from. Include only from *_avx512.cc files; anonymous
// namespace.
#include <cstdint>

#include "kernels/x86/avx512/e4m3_encode_avx512.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {
namespace {

// e4m3 codes of 16 values that are NaN, +-0 or within +-448 * (1 + 2^-22) — what x * (448 / amax)
// can produce — rounded to nearest even. Normals (|v| >= 2^-6) round the f32 bit pattern to 3
// mantissa bits in integer arithmetic and rebias the exponent (127 -> 7); subnormals are
// |v| * 2^9 rounded to an integer with an explicit rounding mode (MXCSR plays no part).
[[gnu::always_inline]] inline __m128i encode16_e4m3_in_range(__m512 v) {
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i mag = _mm512_and_si512(bits, _mm512_set1_epi32(0x7FFFFFFF));
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(mag, 20), _mm512_set1_epi32(1));
  __m512i normal = _mm512_srli_epi32(
      _mm512_add_epi32(mag, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFFF))), 20);
  normal = _mm512_sub_epi32(normal, _mm512_set1_epi32((127 - 7) << 3));
  const __m512 scaled = _mm512_mul_ps(_mm512_castsi512_ps(mag), _mm512_set1_ps(512.0f));
  const __m512i sub = _mm512_cvt_roundps_epi32(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __mmask16 is_sub = _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(0x3C800000));  // 2^-6
  __m512i code = _mm512_mask_mov_epi32(normal, is_sub, sub);
  const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(mag, _mm512_set1_epi32(0x7F800000));
  code = _mm512_mask_mov_epi32(code, is_nan, _mm512_set1_epi32(0x7F));
  code = _mm512_or_si512(code, _mm512_and_si512(_mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80)));
  return _mm512_cvtepi32_epi8(code);
}

// ---- bf16 values, blocks of 64: the normal-range path ----
//
// Costs per 16 elements: the widening split into even and odd elements (one shift or one and
// per 16, no shuffle); one multiply; the e4m3 rounding of normal results on 16-bit lanes; a
// packing of the codes. A block with a result below e4m3's normal range (2^-6) takes the
// branch-free encoder (e4m3_encode_avx512.h) where MXCSR allows, else encode16_e4m3_in_range,
// which is exact for every case.

// 64 bytes of bf16 -> two vectors of f32: elements 0, 2, ..., 30 and 1, 3, ..., 31.
[[gnu::always_inline]] inline void widen_even_odd(__m512i z, __m512& even, __m512& odd) {
  even = bf16_low_f32(z);
  odd = bf16_high_f32(z);
}

// Four vectors of codes (elements 0.., 1.., 32.., 33.. by twos as widen_even_odd gives them)
// -> 64 bytes in element order.
[[gnu::always_inline]] inline __m512i pack_even_odd(__m512i e0, __m512i o0, __m512i e1, __m512i o1) {
  const __m512i w0 = _mm512_or_si512(e0, _mm512_slli_epi32(o0, 8));  // 2 codes per 32-bit lane
  const __m512i w1 = _mm512_or_si512(e1, _mm512_slli_epi32(o1, 8));
  // packus works per 128-bit lane: qword 2k is w0's lane k, qword 2k+1 is w1's.
  return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), _mm512_packus_epi32(w0, w1));
}

// Two vectors of f32 (even and odd elements, as widen_even_odd gives them) -> 32 16-bit lanes in
// element order: the upper half of each f32 with its lowest bit set when any of the lower 16
// bits is: rounded to odd at 8 significant bits. Rounding that to e4m3's 4 bits (to nearest
// even) gives exactly what rounding the f32 would: round-to-odd at two or more extra bits keeps
// the information that decides the second rounding (Boldo and Melquiond).
[[gnu::always_inline]] inline __m512i round_to_odd16(__m512 ve, __m512 vo) {
  const __m512i e = _mm512_castps_si512(ve), o = _mm512_castps_si512(vo);
  const __m512i ones = _mm512_set1_epi32(1);                        // words [1, 0]
  const __m512i sticky_e = _mm512_min_epu16(e, ones);                // low word: lo16(e) != 0
  const __m512i sticky_o = _mm512_slli_epi32(_mm512_min_epu16(o, ones), 16);
  const __m512i halves = _mm512_ternarylogic_epi32(o, _mm512_set1_epi32(int(0xFFFF0000u)),
                                                   _mm512_srli_epi32(e, 16), 0xEA);  // (o & hi) | e >> 16
  return _mm512_ternarylogic_epi32(halves, sticky_e, sticky_o, 0xFE);             // a | b | c
}

// e4m3 codes (sign included, low byte of each 16-bit lane, high byte 0) of 32 values in
// bf16-like form h whose exponent field, less `rebias` (120, or 120 - j for values that are to
// be multiplied by 2^j), is that of an e4m3 normal; lanes below (|value| < 2^-6, zeros
// included) are flagged in `low` and their codes are garbage. c16 = 7 - (rebias << 7) does the
// rebias and adds half-minus-one for rounding to nearest even; low_bits = (rebias + 1) << 7.
[[gnu::always_inline]] inline __m512i encode32_e4m3_normal(__m512i h, __m512i c16, __m512i low_bits,
                                                           __mmask32& low, __m512i w7f = _mm512_set1_epi16(0x7F)) {
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi16(h, 4), _mm512_set1_epi16(1));
  const __m512i n = _mm512_srli_epi16(_mm512_add_epi16(_mm512_add_epi16(h, c16), odd), 4);  // sign << 11 | code
  low |= _mm512_cmplt_epu16_mask(_mm512_and_si512(h, _mm512_set1_epi16(0x7FFF)), low_bits);
  return _mm512_ternarylogic_epi32(n, _mm512_srli_epi16(n, 4), w7f, 0xE4);
}

// How a group's bf16 values become codes: the multiplier, and for a power-of-two multiplier
// 2^j (UE8M0 scales, where every product is exact) the rebias constants that encode x * 2^j
// straight from x's bits.
// (A template parameter, so that f32-scale rows keep the constants out of the group loop.)
struct GroupCode {
  __m512 mv;
  __m512i c16, low_bits;
  __m512i w7f = _mm512_set1_epi16(0x7F);
};

template <bool kPowerOfTwo>
[[gnu::always_inline]] inline GroupCode group_code(float m) {
  uint32_t bits;
  __builtin_memcpy(&bits, &m, 4);
  const int j = kPowerOfTwo ? int(bits >> 23 & 0xFF) - 127 : 0;
  const int rebias = 120 - j;
  return {_mm512_set1_ps(m), _mm512_set1_epi16(short(7 - (rebias << 7))), _mm512_set1_epi16(short((rebias + 1) << 7))};
}

// The rebias constants of f32 scales (group_code<false> of any multiplier), made once per call
// behind an asm barrier: GCC otherwise rebuilds two of them from general registers for every 64
// elements of the panel encoder's loop (the token quantizer's loop keeps them in registers as
// it is).
[[gnu::always_inline]] inline GroupCode fixed_group_code() {
  GroupCode fixed = group_code<false>(1.0f);
  asm("" : "+v"(fixed.c16), "+v"(fixed.low_bits), "+v"(fixed.w7f));
  return fixed;
}

// 32 f32 results, even elements e and odd ones o, -> their bf16 words in element order, for a
// quantizer, by vcvtne2ps2bf16 alone. The instruction reads and writes f32 subnormals as zeros
// of their sign, where a bf16 rounding keeps them; their codes are the same: such a value times
// a multiplier of at most 448 / 1e-4 is far under e4m3's smallest half-ulp, so it codes as a
// zero of its sign either way (times an inf group's 0, +-0; times a NaN group's NaN, that NaN),
// and a group whose largest |value| is subnormal is floored to 1e-4 either way. Not for a bf16
// output: the plain kernels keep the integer rounding there.
[[gnu::always_inline]] inline __m512i bf16_words_in_order(__m512 e, __m512 o) {
  const __m512i order = _mm512_setr_epi32(0x00100000, 0x00110001, 0x00120002, 0x00130003, 0x00140004, 0x00150005,
                                          0x00160006, 0x00170007, 0x00180008, 0x00190009, 0x001A000A, 0x001B000B,
                                          0x001C000C, 0x001D000D, 0x001E000E, 0x001F000F);
  return _mm512_permutexvar_epi16(order, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(o, e)));
}

// The 64 codes of one block (c0, c1: the normal-range encoder's words) as one line at q. When
// some result fell below 2^-6 (low), the whole block takes the exact encoder instead, on the
// unscaled values widened(e0, o0, e1, o1) (even and odd elements of each half) times mv.
template <bool kStream, class Widened>
[[gnu::always_inline]] inline void store_codes64(uint8_t* q, __m512i c0, __m512i c1, __mmask32 low, __m512 mv,
                                                 const Widened& widened) {
  __m512i line;
  if (__builtin_expect(low != 0, 0)) {
    __m512 e0, o0, e1, o1;
    widened(e0, o0, e1, o1);
    const auto code = [&](__m512 v) { return _mm512_cvtepu8_epi32(encode16_e4m3_in_range(_mm512_mul_ps(v, mv))); };
    line = pack_even_odd(code(e0), code(o0), code(e1), code(o1));
  } else {
    // packus works per 128-bit lane: qword 2k holds c0's words 8k.., qword 2k+1 c1's.
    line = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), _mm512_packus_epi16(c0, c1));
  }
  store_code_line<kStream>(q, line);
}

// 64 bf16 -> 64 e4m3 bytes at q, scaled by the group's multiplier; exact for every finite one.
// fast_low: mxcsr_keeps_subnormals() of this thread, which the branch-free encoder needs (blocks
// with results below 2^-6 then take it; else the exact one). Read once per row or panel and
// passed down: stmxcsr per 64-element block cost more than the encoder it chose. run (may be
// null): set to start a run when the block took the branch-free encoder (quant_group_bf16).
constexpr int kBranchFreeGroups = 8;

template <bool kStream, bool kPowerOfTwo>
[[gnu::always_inline]] inline void quant64_bf16(const uint16_t* x, const GroupCode& gc, uint8_t* q, bool fast_low,
                                                int* run = nullptr) {
  const __m512i z0 = _mm512_loadu_si512(x), z1 = _mm512_loadu_si512(x + 32);
  __mmask32 low = 0;
  __m512i c0, c1;
  if constexpr (kPowerOfTwo) {
    c0 = encode32_e4m3_normal(z0, gc.c16, gc.low_bits, low, gc.w7f);
    c1 = encode32_e4m3_normal(z1, gc.c16, gc.low_bits, low, gc.w7f);
  } else {
    __m512 e0, o0, e1, o1;
    widen_even_odd(z0, e0, o0);
    widen_even_odd(z1, e1, o1);
    const __m512 mv = gc.mv;
    e0 = _mm512_mul_ps(e0, mv), o0 = _mm512_mul_ps(o0, mv), e1 = _mm512_mul_ps(e1, mv), o1 = _mm512_mul_ps(o1, mv);
    c0 = encode32_e4m3_normal(round_to_odd16(e0, o0), gc.c16, gc.low_bits, low, gc.w7f);
    c1 = encode32_e4m3_normal(round_to_odd16(e1, o1), gc.c16, gc.low_bits, low, gc.w7f);
  }
  if (__builtin_expect(low != 0, 0) && fast_low) {
    // A result below 2^-6 (an e4m3 subnormal or zero): the branch-free encoder of
    // e4m3_encode_avx512.h takes the block at ~1.3x the normal path's cost, where the exact
    // encoder below costs ~3x (activation outputs send most blocks here).
    if (run) *run = kBranchFreeGroups;
    store_code_line<kStream>(q, e4m3_line64(x, gc.mv, E4m3Encoder{}));
    return;
  }
  store_codes64<kStream>(q, c0, c1, low, gc.mv, [&](__m512& e0, __m512& o0, __m512& e1, __m512& o1) {
    widen_even_odd(z0, e0, o0);
    widen_even_odd(z1, e1, o1);
  });
}

// A group of n bf16 (a multiple of 64) -> n e4m3 bytes at q, by quant64_bf16, with runs of the
// branch-free encoder. branch_free_groups: how many more groups go straight to it, a row's
// running state. A block with results below 2^-6 costs the normal path and then the branch-free
// one, and where one has them its neighbours mostly do too (activation outputs: nearly every
// block), so after a group that had one the next kBranchFreeGroups groups skip the normal path;
// the branch-free encoder costs ~1.3x the normal path (1.8x for UE8M0) on blocks without such
// results, so the normal path is tried again after the run. Both give the same codes. Decided
// per group, not per block: a test in the block loop cost 7-10% on rows without tiny results.

template <bool kStream, bool kPowerOfTwo>
[[gnu::always_inline]] inline void quant_group_bf16(const uint16_t* x, int64_t n, const GroupCode& gc, uint8_t* q,
                                                    bool fast_low, int& branch_free_groups) {
  if (branch_free_groups > 0) {
    --branch_free_groups;
    for (int64_t i = 0; i < n; i += 64) store_code_line<kStream>(q + i, e4m3_line64(x + i, gc.mv, E4m3Encoder{}));
    return;
  }
  for (int64_t i = 0; i < n; i += 64) quant64_bf16<kStream, kPowerOfTwo>(x + i, gc, q + i, fast_low, &branch_free_groups);
}

}  // namespace
}  // namespace sol::kernels
