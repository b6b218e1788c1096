#pragma once
// 16-lane f32 helpers shared by the AVX-512 row kernels: masked loads of f32 or bf16 widened to
// f32, exact f32 -> bf16 rounding, masked stores. Include only from *_avx512.cc files. Everything
// is in an anonymous namespace, so each translation unit has its own copy and the linker can
// never hand baseline code an AVX-512 build of a shared inline function.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "sol/dtype.h"

namespace sol::kernels {
namespace {

// The largest of 32 unsigned words.
[[gnu::always_inline]] inline uint32_t max_of_words(__m512i m) {
  __m256i h = _mm256_max_epu16(_mm512_castsi512_si256(m), _mm512_extracti64x4_epi64(m, 1));
  __m128i q = _mm_max_epu16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  // phminposuw finds the minimum of 8 words: the maximum is the minimum of the complements.
  return 0xFFFFu & ~uint32_t(_mm_cvtsi128_si32(_mm_minpos_epu16(_mm_xor_si128(q, _mm_set1_epi16(-1)))));
}

[[gnu::always_inline]] inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
}

// A 32-bit lane holding two bf16 (a (k, k+1) pair, or an even and an odd element) as two f32:
// a bf16 is the top half of its f32, so the low one widens by a shift and the high one by a
// mask (no shuffle).
[[gnu::always_inline]] inline __m512 bf16_low_f32(__m512i w) { return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)); }
[[gnu::always_inline]] inline __m512 bf16_high_f32(__m512i w) {
  return _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32(int(0xFFFF0000u))));
}

// 16 bf16 as f32 (exact: each widens by a 16-bit shift).
[[gnu::always_inline]] inline __m512 bf16x16_to_f32(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// 16 elements as f32.
[[gnu::always_inline]] inline __m512 load16(const void* p, DType t, int64_t i, __mmask16 m) {
  if (t == DType::bf16) return bf16x16_to_f32(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(p) + i));
  return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + i);
}

// f32 -> bf16, round to nearest even, in integer arithmetic: vcvtneps2bf16 flushes subnormal
// inputs to zero on Zen 5, and the result must equal sol::f32_to_bf16 (NaN: quiet bit set).
[[gnu::always_inline]] inline __m256i to_bf16(__m512 v) {
  __m512i b = _mm512_castps_si512(v);
  __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

[[gnu::always_inline]] inline void store16(void* p, DType t, int64_t i, __mmask16 m, __m512 v) {
  if (t == DType::bf16) _mm256_mask_storeu_epi16(static_cast<uint16_t*>(p) + i, m, to_bf16(v));
  else _mm512_mask_storeu_ps(static_cast<float*>(p) + i, m, v);
}

// 32 f32 -> 32 bf16 in element order (lo first), equal to two to_bf16 calls: the hardware
// vcvtne2ps2bf16 rounds to nearest even and quietens NaNs as sol::f32_to_bf16 does, but treats
// subnormal inputs as zero on Zen 5; one vfpclassps per half finds those (rare) lanes, and then
// the integer rounding handles the whole pair.
[[gnu::always_inline]] inline __m512i to_bf16x32(__m512 lo, __m512 hi) {
  if (__builtin_expect((_mm512_fpclass_ps_mask(lo, 0x20) | _mm512_fpclass_ps_mask(hi, 0x20)) != 0, 0))
    return _mm512_inserti64x4(_mm512_castsi256_si512(to_bf16(lo)), to_bf16(hi), 1);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

// 16 f32 -> 16 bf16 by the hardware conversion, with the same subnormal guard.
[[gnu::always_inline]] inline __m256i to_bf16_hw(__m512 v) {
  if (__builtin_expect(_mm512_fpclass_ps_mask(v, 0x20) != 0, 0)) return to_bf16(v);
  return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
}

// Like store16, with the hardware bf16 rounding.
[[gnu::always_inline]] inline void store16_hw(void* p, DType t, int64_t i, __mmask16 m, __m512 v) {
  if (t == DType::bf16) _mm256_mask_storeu_epi16(static_cast<uint16_t*>(p) + i, m, to_bf16_hw(v));
  else _mm512_mask_storeu_ps(static_cast<float*>(p) + i, m, v);
}

// 32 f32 results stored at element i of p (f32 or bf16): 64 or 128 bytes, streamed (p + i
// 64-byte aligned) or plain.
[[gnu::always_inline]] inline void store32(void* p, DType t, int64_t i, __m512 lo, __m512 hi, bool stream) {
  if (t == DType::bf16) {
    __m512i v = to_bf16x32(lo, hi);
    auto* d = reinterpret_cast<__m512i*>(static_cast<uint16_t*>(p) + i);
    if (stream) _mm512_stream_si512(d, v);
    else _mm512_storeu_si512(d, v);
  } else {
    float* d = static_cast<float*>(p) + i;
    if (stream) _mm512_stream_ps(d, lo), _mm512_stream_ps(d + 16, hi);
    else _mm512_storeu_ps(d, lo), _mm512_storeu_ps(d + 16, hi);
  }
}

// exp(x) to ~2 ulp: x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two for an exact product),
// a degree-6 Taylor/minimax-style polynomial for exp(r), and vscalefps for 2^n, which saturates
// to inf / 0 at the ends of the range instead of wrapping the exponent. x is first clamped to
// [-104, 89] (beyond which exp is 0 or inf in f32) so that +-inf never meets inf - inf in the
// reduction; the constant is the first operand so a NaN x passes through max/min unchanged.
// exp16 after its clamp: x already in [-104, 89] (or NaN). Shared with the kernels that know a
// tighter range and skip part of the clamp (fast16_avx512.h), so both give the same bits.
[[gnu::always_inline]] inline __m512 exp16_clamped(__m512 x) {
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

[[gnu::always_inline]] inline __m512 exp16(__m512 x) {
  return exp16_clamped(_mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x)));
}

}  // namespace
}  // namespace sol::kernels
