// AVX-512 row primitives for FP8 quantization. Everything but the entry points stays in the
// anonymous namespace so no AVX-512 code can be merged into baseline callers by the linker.
#include <algorithm>
#include <cmath>

#include "kernels/quant.h"
#include "kernels/x86/avx512/e4m3_avx512.h"
#include "kernels/x86/avx512/e4m3_encode_avx512.h"
#include "kernels/x86/avx512/e4m3_quant64_avx512.h"
#include "kernels/x86/avx512/vec16_avx512.h"

namespace sol::kernels {

namespace {

// Scales and multipliers of 16 groups from their amax (NaN lanes flagged in `nan`), by the rule
// of sol/quant.h: amax floored at 1e-4; scale = amax / 448, rounded up to a power of two for
// UE8M0 (finite values only); multiplier 448 / amax, or 1 / scale for UE8M0.
[[gnu::always_inline]] inline void scales16(__m512 amax, __mmask16 nan, bool ue8m0, __m512& scale,
                                            __m512& mult) {
  amax = _mm512_max_ps(amax, _mm512_set1_ps(1e-4f));
  amax = _mm512_mask_mov_ps(amax, nan, _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
  scale = _mm512_div_ps(amax, _mm512_set1_ps(448.0f));
  if (!ue8m0) {
    mult = _mm512_div_ps(_mm512_set1_ps(448.0f), amax);
    return;
  }
  const __m512i b = _mm512_castps_si512(scale);
  const __mmask16 finite = _mm512_cmplt_epi32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF)),
                                                   _mm512_set1_epi32(0x7F800000));
  const __mmask16 inexact = _mm512_test_epi32_mask(b, _mm512_set1_epi32(0x7FFFFF));
  const __m512i up = _mm512_add_epi32(_mm512_and_si512(b, _mm512_set1_epi32(int(0xFF800000u))),
                                      _mm512_set1_epi32(0x800000));
  scale = _mm512_castsi512_ps(_mm512_mask_mov_epi32(b, finite & inexact, up));
  mult = _mm512_div_ps(_mm512_set1_ps(1.0f), scale);
}

// The largest |x| of one group as bf16 magnitude bits (> 0x7F80: a NaN is present). The pass
// reads the row from memory, requesting it `ahead` bytes on into L1 (the tuning's
// pass_prefetch_bytes) and, when l2_ahead is not 0, l2_ahead bytes on into L2 (rows whose codes
// stream: the L1 requests then find their lines on the way and free their miss buffers sooner).
[[gnu::always_inline]] inline uint32_t group_amax_bits(const uint16_t* x, int64_t group, int64_t ahead,
                                                       int64_t l2_ahead) {
  const __m512i mask = _mm512_set1_epi16(0x7FFF);
  __m512i m0 = _mm512_setzero_si512(), m1 = m0;
  for (int64_t i = 0; i < group; i += 64) {
    if (l2_ahead) {
      _mm_prefetch(reinterpret_cast<const char*>(x + i) + l2_ahead, _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(x + i) + l2_ahead + 64, _MM_HINT_T1);
    }
    _mm_prefetch(reinterpret_cast<const char*>(x + i) + ahead, _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(x + i) + ahead + 64, _MM_HINT_T0);
    m0 = _mm512_max_epu16(m0, _mm512_and_si512(_mm512_loadu_si512(x + i), mask));
    m1 = _mm512_max_epu16(m1, _mm512_and_si512(_mm512_loadu_si512(x + i + 32), mask));
  }
  return max_of_words(_mm512_max_epu16(m0, m1));
}

// One group of bf16 (a multiple of 64 elements) scaled by m and encoded. special: the group
// holds NaN or inf (m is NaN or 0): the general encoder, which handles NaN lanes, takes it.
// fixed (may be null; f32 scales only): the rebias constants, made once by the caller.
// branch_free_groups: quant_group_bf16's run, carried along the row; kRuns false: no runs
// (every block tries the normal path first) and no counter (null).
template <bool kStream, bool kUe8m0, bool kRuns = true>
[[gnu::always_inline]] inline void encode_group_bf16(const uint16_t* x, int64_t group, float m, bool special,
                                                     uint8_t* q, bool fast_low, int* branch_free_groups,
                                                     const GroupCode* fixed = nullptr) {
  const __m512 mv = _mm512_set1_ps(m);
  if (__builtin_expect(special, 0)) {
    for (int64_t i = 0; i < group; i += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i),
                       encode16_e4m3_in_range(_mm512_mul_ps(load16(x, DType::bf16, i, 0xFFFF), mv)));
    return;
  }
  GroupCode gc;
  if (!kUe8m0 && fixed) gc = *fixed, gc.mv = mv;
  else gc = group_code<kUe8m0>(m);
  if constexpr (kRuns) {
    quant_group_bf16<kStream, kUe8m0>(x, group, gc, q, fast_low, *branch_free_groups);
  } else {
    for (int64_t i = 0; i < group; i += 64) quant64_bf16<kStream, kUe8m0>(x + i, gc, q + i, fast_low);
  }
}

// ---- rmsnorm fused with per-token quantization, bf16 rows, groups of 64 or 128 ----
//
// One output pass per row: x split into even and odd elements (a shift and an and, no
// shuffle), the weight pre-arranged the same way (even_odd_order_avx512), y = (x * inv) * w
// rounded to bf16 by the hardware conversion and put back in element order (one word
// permutation), the group's abs-max taken on those words, and the group encoded from a small
// L1 buffer a group or more later (rms_quant_row_t says why) by the same encoder as the plain
// quantizer. No bf16 row is written to memory and read back, and no per-group partial maxima
// go through memory.

// 32 elements of a row: y's even (e) and odd (o) elements in f32, before the bf16 rounding.
struct EvenOdd {
  __m512 e, o;
};

[[gnu::always_inline]] inline EvenOdd rms_products32(const uint16_t* x, const float* w_eo, __m512 iv) {
  __m512 e, o;
  widen_even_odd(_mm512_loadu_si512(x), e, o);
  return {_mm512_mul_ps(_mm512_mul_ps(e, iv), _mm512_loadu_ps(w_eo)),
          _mm512_mul_ps(_mm512_mul_ps(o, iv), _mm512_loadu_ps(w_eo + 16))};
}

// One group's y = bf16((x * inv) * w) as bf16 words in element order at out (bf16_words_in_order:
// subnormal y flushed, same codes), and its abs-max as bf16 magnitude bits << 16 (above
// 0x7F800000: a NaN).
template <int kBlocks64>
[[gnu::always_inline]] inline uint32_t rms_group_words(const uint16_t* x, const float* w_eo, __m512 iv, uint16_t* out) {
  const __m512i mag = _mm512_set1_epi16(0x7FFF);
  __m512i m = _mm512_setzero_si512();
  for (int k = 0; k < 2 * kBlocks64; ++k) {
    const EvenOdd p = rms_products32(x + 32 * k, w_eo + 32 * k, iv);
    const __m512i h = bf16_words_in_order(p.e, p.o);
    m = _mm512_max_epu16(m, _mm512_and_si512(h, mag));
    _mm512_store_si512(out + 32 * k, h);
  }
  return max_of_words(m) << 16;
}

// A group holding NaN or inf (rare): its bf16 values rounded as to_bf16 does (NaN quieted),
// staged in L1, and encoded by encode_group_bf16's general path; scale by scales16.
template <bool kUe8m0>
[[gnu::noinline]] void rms_quant_group_special(const uint16_t* x, const float* w_eo, __m512 iv, int64_t group,
                                               uint8_t* q, float* scale_out) {
  alignas(64) uint16_t y[128];
  __m512i m = _mm512_setzero_si512();
  for (int64_t i = 0; i < group; i += 32) {
    const EvenOdd v = rms_products32(x + i, w_eo + i, iv);
    const __m512i e = _mm512_cvtepu16_epi32(to_bf16(v.e)), o = _mm512_cvtepu16_epi32(to_bf16(v.o));
    const __m512i h = _mm512_or_si512(e, _mm512_slli_epi32(o, 16));
    _mm512_store_si512(y + i, h);
    m = _mm512_max_epu16(m, _mm512_and_si512(h, _mm512_set1_epi16(0x7FFF)));
  }
  const __m512i ab = _mm512_set1_epi32(int(max_of_words(m) << 16));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(ab, _mm512_set1_epi32(0x7F800000));
  __m512 scale, mult;
  scales16(_mm512_castsi512_ps(ab), nan, kUe8m0, scale, mult);
  *scale_out = _mm512_cvtss_f32(scale);
  encode_group_bf16<false, kUe8m0, false>(y, group, _mm512_cvtss_f32(mult), true, q, false, nullptr);
}

alignas(64) const uint16_t kIdleRow[32] = {};  // what an absent next row prefetches

template <bool kStream, bool kUe8m0, int kBlocks64, int kAhead>
void rms_quant_row_t(const uint16_t* x, float inv, const float* w_eo, int64_t cols, uint8_t* q, float* scales,
                     int64_t scale_stride, const uint16_t* next_row) {
  constexpr int64_t group = 64 * kBlocks64;
  const __m512 iv = _mm512_set1_ps(inv);
  const GroupCode fixed = fixed_group_code();
  const bool fast_low = mxcsr_keeps_subnormals();
  int branch_free_groups = 0;  // quant_group_bf16's run, carried along the row
  // The next row's lines, one per 32 elements of this one, as the norms' output passes do.
  const char* next = next_row ? reinterpret_cast<const char*>(next_row) : reinterpret_cast<const char*>(kIdleRow);
  const int64_t next_step = next_row ? group * 2 : 0;
  // Software-pipelined by kAhead groups (the tuning's quant_pipeline_groups): group g + kAhead
  // is normalised into an L1 buffer of
  // kAhead + 1 slots, its abs-max reduced and its scale divided out, while group g is encoded
  // from the buffer with a multiplier already known. Encoding each group right after its own
  // reduction and division (a ~60-cycle chain) left the vector scheduler full of waiting
  // encode work, slower than a two-pass code; one group of lead recovered that, three a
  // little more (1, 3, 5 and 7 measured; `sol tune` chooses per machine).
  constexpr int kSlots = kAhead + 1;
  alignas(64) uint16_t buf[kSlots][group];  // y in bf16
  const int64_t groups = cols / group;
  // Groups holding NaN or inf are encoded after each run of 64 groups: a call inside the loop
  // would clobber every vector register there (all are caller-saved), and GCC then rebuilt the
  // loop's constants on every group.
  struct Made {
    bool ok = false;  // false: the group holds NaN or inf
    float mult = 0;
  };
  auto produce = [&](int64_t g) __attribute__((always_inline)) {
    for (int64_t l = 0; l < group * 2; l += 64) _mm_prefetch(next + l, _MM_HINT_T0);
    next += next_step;
    const uint32_t amax_bits = rms_group_words<kBlocks64>(x + g * group, w_eo + g * group, iv, buf[g % kSlots]);
    // inf groups too (they would come out the same through the main path: scale inf,
    // multiplier 0, every product 0 or NaN, encoded by the exact fallback), so one rule holds.
    Made made;
    if (__builtin_expect(amax_bits >= 0x7F800000u, 0)) return made;
    float amax, scale;
    __builtin_memcpy(&amax, &amax_bits, 4);
    fp8_group_scale(amax, kUe8m0, scale, made.mult);
    scales[g * scale_stride] = scale;
    made.ok = true;
    return made;
  };
  for (int64_t g0 = 0; g0 < groups; g0 += 64) {
    const int64_t g1 = groups - g0 < 64 ? groups : g0 + 64;
    uint64_t special = 0;
    // made[k]: group g + k's result; a queue shifted by one each group, with constant indices
    // only, so that it stays in registers.
    Made made[kAhead];
    for (int k = 0; k < kAhead; ++k)
      if (g0 + k < g1) made[k] = produce(g0 + k);
    for (int64_t g = g0; g < g1; ++g) {
      const Made cur = made[0];
      for (int k = 0; k + 1 < kAhead; ++k) made[k] = made[k + 1];
      if (g + kAhead < g1) made[kAhead - 1] = produce(g + kAhead);
      if (__builtin_expect(cur.ok, 1)) {
        // f32 scales: the rebias constants made once (fixed), only the multiplier per group.
        GroupCode gc = fixed;
        if constexpr (kUe8m0) gc = group_code<true>(cur.mult);
        else gc.mv = _mm512_set1_ps(cur.mult);
        const uint16_t* h = buf[g % kSlots];
        quant_group_bf16<kStream, kUe8m0>(h, group, gc, q + g * group, fast_low, branch_free_groups);
      } else {
        special |= uint64_t(1) << (g - g0);
      }
    }
    for (; special; special &= special - 1) {
      const int64_t g = g0 + __builtin_ctzll(special), base = g * group;
      rms_quant_group_special<kUe8m0>(x + base, w_eo + base, iv, group, q + base, scales + g * scale_stride);
    }
  }
  if constexpr (kStream) _mm_sfence();
}

// The scales and multipliers of up to 16 groups from their abs-max bits (bf16 magnitude << 16);
// special: the groups holding NaN or inf.
struct GroupScales16 {
  alignas(64) float scale[16];
  alignas(64) float mult[16];
  __mmask16 special;
};

[[gnu::always_inline]] inline void group_scales16(const uint32_t* amax_bits, int64_t ng, bool ue8m0,
                                                  GroupScales16& out) {
  const __m512i ab = _mm512_maskz_load_epi32(tail_mask(ng), amax_bits);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(ab, _mm512_set1_epi32(0x7F800000));
  out.special = _mm512_cmpge_epu32_mask(ab, _mm512_set1_epi32(0x7F800000));
  __m512 scale, mult;
  scales16(_mm512_castsi512_ps(ab), nan, ue8m0, scale, mult);
  _mm512_store_ps(out.scale, scale);
  _mm512_store_ps(out.mult, mult);
}

// Groups g0 .. g0 + ng - 1 of a row encoded with their scales gs (scales stored), and
// after(g) run after the chunk's group g.
template <bool kStream, bool kUe8m0, class After>
[[gnu::always_inline]] inline void encode_chunk(const uint16_t* x, int64_t g0, int64_t ng, int64_t group,
                                                const GroupScales16& gs, uint8_t* q, float* scales,
                                                int64_t scale_stride, bool fast_low, int& branch_free_groups,
                                                After after) {
  for (int64_t g = 0; g < ng; ++g) {
    const int64_t base = (g0 + g) * group;
    scales[(g0 + g) * scale_stride] = gs.scale[g];
    encode_group_bf16<kStream, kUe8m0>(x + base, group, gs.mult[g], (gs.special >> g) & 1, q + base, fast_low,
                                       &branch_free_groups);
    after(g);
  }
}

// A row's groups in chunks of 16, the abs-max of chunk c + 1 interleaved group by group with
// the encoding of chunk c. The abs-max is what reads the row from memory (its loads, and its
// prefetches `ahead` and `l2_ahead` bytes on); as a pass of its own before each chunk's
// encoding, the memory stream stopped while the encoder worked from L1.
template <bool kStream, bool kUe8m0>
void quant_row_bf16_t(const uint16_t* x, int64_t cols, int64_t group, uint8_t* q, float* scales,
                      int64_t scale_stride, int64_t ahead, int64_t l2_ahead, bool fence) {
  constexpr int64_t kLanes = 16;
  alignas(64) uint32_t amax_bits[2][kLanes];
  const int64_t groups = cols / group;
  const bool fast_low = mxcsr_keeps_subnormals();
  int branch_free_groups = 0;  // quant_group_bf16's run, carried along the row
  for (int64_t g = 0; g < std::min(kLanes, groups); ++g)
    amax_bits[0][g] = group_amax_bits(x + g * group, group, ahead, l2_ahead) << 16;
  GroupScales16 gs;
  for (int64_t g0 = 0, c = 0; g0 < groups; g0 += kLanes, c ^= 1) {
    const int64_t ng = std::min(kLanes, groups - g0), n_next = std::min(kLanes, groups - g0 - ng);
    group_scales16(amax_bits[c], ng, kUe8m0, gs);
    const uint16_t* xn = x + (g0 + ng) * group;
    encode_chunk<kStream, kUe8m0>(x, g0, ng, group, gs, q, scales, scale_stride, fast_low, branch_free_groups,
                                  [&](int64_t g) {
      if (g < n_next) amax_bits[c ^ 1][g] = group_amax_bits(xn + g * group, group, ahead, l2_ahead) << 16;
    });
  }
  if constexpr (kStream)
    if (fence) _mm_sfence();
}

// quant_row_bf16_t for groups whose partial maxima are given: amax32 holds 32 words per group.
template <bool kStream, bool kUe8m0>
void quant_row_bf16_given_amax_t(const uint16_t* x, int64_t cols, int64_t group, uint8_t* q, float* scales,
                                 int64_t scale_stride, const uint16_t* amax32) {
  constexpr int64_t kLanes = 16;
  alignas(64) uint32_t amax_bits[kLanes];
  const int64_t groups = cols / group;
  const bool fast_low = mxcsr_keeps_subnormals();
  int branch_free_groups = 0;  // quant_group_bf16's run, carried along the row
  GroupScales16 gs;
  for (int64_t g0 = 0; g0 < groups; g0 += kLanes) {
    const int64_t ng = std::min(kLanes, groups - g0);
    for (int64_t g = 0; g < ng; ++g) amax_bits[g] = max_of_words(_mm512_loadu_si512(amax32 + (g0 + g) * 32)) << 16;
    group_scales16(amax_bits, ng, kUe8m0, gs);
    encode_chunk<kStream, kUe8m0>(x, g0, ng, group, gs, q, scales, scale_stride, fast_low, branch_free_groups,
                                  [](int64_t) {});
  }
  if constexpr (kStream) _mm_sfence();
}

// ---- dequantization, groups a multiple of 64 ----

// 64 codes -> 64 outputs of type YT: e4m3 -> bf16 by table (exact; NaN as e4m3_to_f32 gives
// it), widened to f32, one multiply by the group's scale, rounded to YT.
// A NaN code keeps its own NaN (0x7FF00000, signed) whatever the scale, as the reference's
// e4m3_to_f32(q) * s does on x86 (the first operand's NaN wins when both are NaN, which is what
// a NaN group's scale meets): those lanes skip the multiply.
template <DType YT, bool kStream>
[[gnu::always_inline]] inline void dequant64(const uint8_t* q, __m512 sv, void* y, int64_t i) {
  const __m512i bytes = _mm512_loadu_si512(q + i);
  const __m512i low7 = _mm512_set1_epi8(0x7F);
  const __mmask64 nan = _mm512_cmpeq_epi8_mask(_mm512_and_si512(bytes, low7), low7);
  for (int half = 0; half < 2; ++half) {
    const __m512i h = e4m3x32_to_bf16(half ? _mm512_extracti64x4_epi64(bytes, 1) : _mm512_castsi512_si256(bytes));
    const __m512 lo = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
    const __m512 hi = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
    const __mmask16 nan_lo = __mmask16(nan >> (32 * half)), nan_hi = __mmask16(nan >> (32 * half + 16));
    store32(y, YT, i + 32 * half, _mm512_mask_mul_ps(lo, __mmask16(~nan_lo), lo, sv),
            _mm512_mask_mul_ps(hi, __mmask16(~nan_hi), hi, sv), kStream);
  }
}

// ---- dequantization to bf16 without the shuffle port ----
//
// dequant64 spends ~20 cycles per 64 codes on Zen 5's one 512-bit shuffle pipe: two vpermt2w
// per 32 (about 2 cycles each), the byte and word widenings (vpmovzx, one per cycle) and their
// extracts. Normal and zero codes decode by arithmetic instead, and the bytes split into even
// and odd elements (and, shift) rather than widening: per 64 codes that leaves two bf16
// conversions and two vpermt2w that put the results back in element order. Subnormal and NaN
// codes (rare) take dequant64 for their 64-code block.

// The constants of the fast dequantization loop, made once per row and hidden from the
// compiler's constant folding (asm barrier): otherwise GCC rebuilds each from a general register
// inside the loop (seven broadcasts per 64 codes) to make room for the table path's registers.
struct DequantConstants {
  __m512i w7f, w_bias, w_sign, w_ff, hi, b7f, b01, b07, first, second;
  DequantConstants() {
    w7f = _mm512_set1_epi16(0x7F), w_bias = _mm512_set1_epi16(120 << 7), w_sign = _mm512_set1_epi16(short(0x8000));
    w_ff = _mm512_set1_epi16(0xFF), hi = _mm512_set1_epi32(int(0xFFFF0000u));
    b7f = _mm512_set1_epi8(0x7F), b01 = _mm512_set1_epi8(1), b07 = _mm512_set1_epi8(7);
    // Element n of a block of 32 is word n / 4 (+ 16 for n % 4 == 1 or 3) of a (n % 4 < 2) or b.
    first = _mm512_setr_epi32(0x00100000, 0x00300020, 0x00110001, 0x00310021, 0x00120002, 0x00320022, 0x00130003,
                              0x00330023, 0x00140004, 0x00340024, 0x00150005, 0x00350025, 0x00160006, 0x00360026,
                              0x00170007, 0x00370027);
    second = _mm512_add_epi16(first, _mm512_set1_epi16(8));
    asm("" : "+v"(w7f), "+v"(w_bias), "+v"(w_sign), "+v"(w_ff), "+v"(hi));
    asm("" : "+v"(b7f), "+v"(b01), "+v"(b07), "+v"(first), "+v"(second));
  }
};

// e4m3 codes that are normal or zero (low byte of each 16-bit lane, high byte 0) -> bf16 bits:
// exponent and mantissa move under bf16's fields, plus the bias difference (127 - 7) << 7; a
// zero code keeps only its sign.
[[gnu::always_inline]] inline __m512i e4m3_normal_to_bf16(__m512i c, const DequantConstants& k) {
  const __m512i t = _mm512_and_si512(c, k.w7f);
  const __mmask32 nonzero = _mm512_test_epi16_mask(c, k.w7f);
  const __m512i mag = _mm512_maskz_add_epi16(nonzero, _mm512_slli_epi16(t, 4), k.w_bias);
  // sign from c << 8 (bit 15), the rest from mag
  return _mm512_ternarylogic_epi32(mag, _mm512_slli_epi16(c, 8), k.w_sign, 0xD8);
}

// True when some of the 64 codes are subnormal (magnitude 1..7) or NaN (0x7F).
[[gnu::always_inline]] inline bool has_special_codes(__m512i z, const DequantConstants& k) {
  const __m512i t = _mm512_and_si512(z, k.b7f);
  const __mmask64 sub = _mm512_cmplt_epu8_mask(_mm512_sub_epi8(t, k.b01), k.b07);
  return (sub | _mm512_cmpeq_epi8_mask(t, k.b7f)) != 0;
}

// 64 codes without special ones -> 64 bf16 of code * s, rounded once (s: |s| >= 2^-119 or not
// finite, so that no product of a nonzero code is an f32 subnormal, which the hardware bf16
// conversion would read as zero).
template <bool kStream>
[[gnu::always_inline]] inline void dequant64_bf16_normal(__m512i z, __m512 sv, uint16_t* y,
                                                         const DequantConstants& k) {
  const __m512i even = e4m3_normal_to_bf16(_mm512_and_si512(z, k.w_ff), k);  // elements 2j
  const __m512i odd = e4m3_normal_to_bf16(_mm512_srli_epi16(z, 8), k);       // elements 2j + 1
  const __m512 e0 = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(even, 16)), sv);  // elements 4k
  const __m512 e2 = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(even, k.hi)), sv);  // 4k + 2
  const __m512 e1 = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(odd, 16)), sv);   // 4k + 1
  const __m512 e3 = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(odd, k.hi)), sv);   // 4k + 3
  const __m512i a = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(e1, e0));  // words: 4k, then 4k + 1
  const __m512i b = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(e3, e2));  // words: 4k + 2, then 4k + 3
  const __m512i lo = _mm512_permutex2var_epi16(a, k.first, b), hi = _mm512_permutex2var_epi16(a, k.second, b);
  auto* d = reinterpret_cast<__m512i*>(y);
  if constexpr (kStream) _mm512_stream_si512(d, lo), _mm512_stream_si512(d + 1, hi);
  else _mm512_storeu_si512(d, lo), _mm512_storeu_si512(d + 1, hi);
}

template <DType YT, bool kStream>
void dequant_row_t(const uint8_t* q, const float* scales, int64_t scale_stride, int64_t cols, int64_t group,
                   void* y, int64_t ahead, bool fence) {
  const DequantConstants k;
  for (int64_t g = 0; g * group < cols; ++g) {
    const float s = scales[g * scale_stride];
    const __m512 sv = _mm512_set1_ps(s);
    const bool normal_products = !(std::fabs(s) < 0x1p-119f);
    for (int64_t i = g * group; i < (g + 1) * group; i += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(q + i) + ahead, _MM_HINT_T0);
      if constexpr (YT == DType::bf16) {
        const __m512i z = _mm512_loadu_si512(q + i);
        if (__builtin_expect(normal_products && !has_special_codes(z, k), 1)) {
          dequant64_bf16_normal<kStream>(z, sv, static_cast<uint16_t*>(y) + i, k);
          continue;
        }
      }
      dequant64<YT, kStream>(q, sv, y, i);
    }
  }
  if constexpr (kStream)
    if (fence) _mm_sfence();
}

// The running maximum of |x| (as 16-bit magnitude words, 32 per 128-wide group) of one group
// of a row, folded into acc.
[[gnu::always_inline]] inline void amax_group_update(const uint16_t* xg, uint16_t* acc) {
  const __m512i mask = _mm512_set1_epi16(0x7FFF);
  const __m512i a = _mm512_max_epu16(_mm512_and_si512(_mm512_loadu_si512(xg), mask),
                                     _mm512_and_si512(_mm512_loadu_si512(xg + 32), mask));
  const __m512i b = _mm512_max_epu16(_mm512_and_si512(_mm512_loadu_si512(xg + 64), mask),
                                     _mm512_and_si512(_mm512_loadu_si512(xg + 96), mask));
  __m512i* ag = reinterpret_cast<__m512i*>(acc);
  _mm512_storeu_si512(ag, _mm512_max_epu16(_mm512_loadu_si512(ag), _mm512_max_epu16(a, b)));
}

[[gnu::always_inline]] inline void amax_row_update(const uint16_t* x, int64_t groups, uint16_t* acc) {
  for (int64_t g = 0; g < groups; ++g) amax_group_update(x + g * 128, acc + g * 32);
}

[[gnu::always_inline]] inline void prefetch_group_t0(const uint16_t* xg) {
  for (int l = 0; l < 4; ++l) _mm_prefetch(reinterpret_cast<const char*>(xg) + 64 * l, _MM_HINT_T0);
}

[[gnu::always_inline]] inline void prefetch_row_t1(const PanelPrefetch& p, int64_t r) {
  const char* line = p.base + r * p.stride;
  for (int64_t l = 0; l < p.lines; ++l) _mm_prefetch(line + 64 * l, _MM_HINT_T1);
}

// One panel of a block row, three panels in flight: row r of this panel is encoded with its
// block's multiplier, row r of the next panel (in L2 by now) goes through the abs-max, and row
// r of the panel after that is requested into L2 (T1). The abs-max loads overlap the encoder's
// shifts instead of running as a pass of their own, and the DRAM reads, strided across rows
// where the hardware prefetcher does not follow, are all issued one panel ahead of their use.
// One fence per panel, not per row.
template <bool kStream, bool kUe8m0>
void quant_panel_t(const uint16_t* x, int64_t x_stride, int64_t rows, int64_t cols, const float* mult,
                   const uint8_t* special, uint8_t* q, int64_t q_stride, const PanelAmax& next,
                   const PanelPrefetch& far) {
  const GroupCode fixed = fixed_group_code();
  const bool fast_low = mxcsr_keeps_subnormals();
  const int64_t groups = cols / 128, next_groups = next.cols / 128;
  const int64_t lines_per_group = (far.lines + groups - 1) / groups;
  for (int64_t r = 0; r < rows; ++r) {
    // The next panel's abs-max and the far panel's requests spread over this row's groups, so
    // that their loads meet the encoder's arithmetic a group at a time.
    const bool amax = r < next.rows, ahead = r < far.rows;
    const uint16_t* xn = next.x + r * next.stride;
    const char* xf = far.base + r * far.stride;
    const uint16_t* xr = x + r * x_stride;
    uint8_t* qr = q + r * q_stride;
    for (int64_t g = 0; g < groups; ++g) {
      if (ahead)
        for (int64_t l = g * lines_per_group; l < std::min(far.lines, (g + 1) * lines_per_group); ++l)
          _mm_prefetch(xf + 64 * l, _MM_HINT_T1);
      // The same group of the next row, of this panel and of the next, from L2 into L1: rows
      // 14 KiB apart are a stride the L1 prefetcher does not follow (-3 to -6% per row).
      if (r + 1 < rows) prefetch_group_t0(xr + x_stride + g * 128);
      if (r + 1 < next.rows && g < next_groups) prefetch_group_t0(xn + next.stride + g * 128);
      if (amax && g < next_groups) amax_group_update(xn + g * 128, next.acc + g * 32);
      // No runs: a per-block run test cost the panel loop its register allocation (7-10%).
      encode_group_bf16<kStream, kUe8m0, false>(xr + g * 128, 128, mult[g], special[g], qr + g * 128, fast_low,
                                                nullptr, &fixed);
    }
    if (amax)
      for (int64_t g = groups; g < next_groups; ++g) amax_group_update(xn + g * 128, next.acc + g * 32);
  }
  // A following panel taller than this one (the band after a partial one: not made today).
  for (int64_t r = rows; r < far.rows; ++r) prefetch_row_t1(far, r);
  for (int64_t r = rows; r < next.rows; ++r) amax_row_update(next.x + r * next.stride, next_groups, next.acc);
  if constexpr (kStream) _mm_sfence();
}

}  // namespace

void block_amax_rows_bf16_avx512(const PanelAmax& panel, const PanelPrefetch& next) {
  for (int64_t r = 0; r < std::max(panel.rows, next.rows); ++r) {
    if (r < next.rows) prefetch_row_t1(next, r);
    if (r < panel.rows) amax_row_update(panel.x + r * panel.stride, panel.cols / 128, panel.acc);
  }
}

float block_amax_finish_avx512(const uint16_t* acc32) {
  const uint32_t bits = max_of_words(_mm512_loadu_si512(acc32)) << 16;
  if (bits > 0x7F800000u) return __builtin_nanf("");
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

void quant_panel_mults_bf16_avx512(const uint16_t* x, int64_t x_stride, int64_t rows, int64_t cols, const float* mult,
                                   const uint8_t* special, bool ue8m0, uint8_t* q, int64_t q_stride, bool stream,
                                   const PanelAmax& next, const PanelPrefetch& far) {
  const bool s = stream && reinterpret_cast<uintptr_t>(q) % 64 == 0 && q_stride % 64 == 0;
  auto run = [&]<bool kS, bool kU>() {
    quant_panel_t<kS, kU>(x, x_stride, rows, cols, mult, special, q, q_stride, next, far);
  };
  if (ue8m0) s ? run.template operator()<true, true>() : run.template operator()<false, true>();
  else s ? run.template operator()<true, false>() : run.template operator()<false, false>();
}

bool dequant_row_avx512(const uint8_t* q, const float* scales, int64_t scale_stride, int64_t cols, int64_t group,
                        void* y, DType yt, bool stream, int64_t ahead, bool fence) {
  if (group % 64 != 0) return false;
  if (stream && reinterpret_cast<uintptr_t>(y) % 64 != 0) stream = false;
  if (yt == DType::bf16) {
    if (stream) dequant_row_t<DType::bf16, true>(q, scales, scale_stride, cols, group, y, ahead, fence);
    else dequant_row_t<DType::bf16, false>(q, scales, scale_stride, cols, group, y, ahead, fence);
  } else {
    if (stream) dequant_row_t<DType::f32, true>(q, scales, scale_stride, cols, group, y, ahead, fence);
    else dequant_row_t<DType::f32, false>(q, scales, scale_stride, cols, group, y, ahead, fence);
  }
  return true;
}

void quant_row_e4m3_avx512(const void* x, DType t, int64_t cols, int64_t group, bool ue8m0,
                           uint8_t* q, float* scales, int64_t scale_stride, bool stream, const TuningParams& tp,
                           bool fence) {
  if (t == DType::bf16 && group % 64 == 0) {
    const auto* xb = static_cast<const uint16_t*>(x);
    const bool s = stream && reinterpret_cast<uintptr_t>(q) % 64 == 0;
    const int64_t ahead = tp.pass_prefetch_bytes;
    // The L2 look-ahead only where the codes stream: a decode-sized call (16 rows) would spend
    // it on lines past its last row.
    const int64_t l2 = s ? tp.pass_l2_prefetch_bytes : 0;
    if (ue8m0) return s ? quant_row_bf16_t<true, true>(xb, cols, group, q, scales, scale_stride, ahead, l2, fence)
                        : quant_row_bf16_t<false, true>(xb, cols, group, q, scales, scale_stride, ahead, l2, fence);
    return s ? quant_row_bf16_t<true, false>(xb, cols, group, q, scales, scale_stride, ahead, l2, fence)
             : quant_row_bf16_t<false, false>(xb, cols, group, q, scales, scale_stride, ahead, l2, fence);
  }
  // Groups are handled 16 at a time so their scales are computed in one vector.
  constexpr int kLanes = 16;
  alignas(64) float amax_of[kLanes], scale_of[kLanes], mult_of[kLanes];
  const int64_t groups = cols / group;
  for (int64_t g0 = 0; g0 < groups; g0 += kLanes) {
    const int64_t ng = groups - g0 < kLanes ? groups - g0 : kLanes;
    __mmask16 nan = 0;
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t base = (g0 + g) * group;
      __m512 m = _mm512_setzero_ps();
      __mmask16 bad = 0;
      for (int64_t i = 0; i < group; i += kLanes) {
        __m512 a = _mm512_abs_ps(load16(x, t, base + i, 0xFFFF));
        bad |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
        m = _mm512_max_ps(m, a);
      }
      amax_of[g] = _mm512_reduce_max_ps(m);
      if (bad) nan |= __mmask16(1u << g);
    }
    __m512 scale, mult;
    scales16(_mm512_maskz_load_ps(tail_mask(ng), amax_of), nan, ue8m0, scale, mult);
    _mm512_store_ps(scale_of, scale);
    _mm512_store_ps(mult_of, mult);
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t base = (g0 + g) * group;
      scales[(g0 + g) * scale_stride] = scale_of[g];
      const __m512 mv = _mm512_set1_ps(mult_of[g]);
      for (int64_t i = 0; i < group; i += kLanes)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + base + i),
                         encode16_e4m3_in_range(_mm512_mul_ps(load16(x, t, base + i, 0xFFFF), mv)));
    }
  }
}

void quant_row_bf16_amax_avx512(const uint16_t* x, int64_t cols, int64_t group, const uint16_t* amax32, bool ue8m0,
                                uint8_t* q, float* scales, int64_t scale_stride, bool stream) {
  const bool s = stream && reinterpret_cast<uintptr_t>(q) % 64 == 0;
  if (ue8m0) return s ? quant_row_bf16_given_amax_t<true, true>(x, cols, group, q, scales, scale_stride, amax32)
                      : quant_row_bf16_given_amax_t<false, true>(x, cols, group, q, scales, scale_stride, amax32);
  s ? quant_row_bf16_given_amax_t<true, false>(x, cols, group, q, scales, scale_stride, amax32)
    : quant_row_bf16_given_amax_t<false, false>(x, cols, group, q, scales, scale_stride, amax32);
}

void even_odd_order_avx512(const float* w, float* w_eo, int64_t n) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t i = 0; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(w + i), b = _mm512_loadu_ps(w + i + 16);
    _mm512_storeu_ps(w_eo + i, _mm512_permutex2var_ps(a, even, b));
    _mm512_storeu_ps(w_eo + i + 16, _mm512_permutex2var_ps(a, odd, b));
  }
}

bool rms_quant_row_bf16_avx512(const uint16_t* x, float inv, const float* w_eo, int64_t cols, int64_t group,
                               bool ue8m0, uint8_t* q, float* scales, int64_t scale_stride, bool stream,
                               const uint16_t* next_row, const TuningParams& tp) {
  if ((group != 64 && group != 128) || cols % group != 0) return false;
  const bool s = stream && reinterpret_cast<uintptr_t>(q) % 64 == 0;
  auto at_depth = [&]<bool kS, bool kU, int kBlocks64>() {
    auto one = [&]<int kAhead>() {
      rms_quant_row_t<kS, kU, kBlocks64, kAhead>(x, inv, w_eo, cols, q, scales, scale_stride, next_row);
    };
    switch (tp.quant_pipeline_groups) {  // validated to [1, 4] (sol/tuning.h)
      case 1: return one.template operator()<1>();
      case 2: return one.template operator()<2>();
      case 4: return one.template operator()<4>();
      default: return one.template operator()<3>();
    }
  };
  auto run = [&]<bool kS, bool kU>() {
    if (group == 128) at_depth.template operator()<kS, kU, 2>();
    else at_depth.template operator()<kS, kU, 1>();
  };
  if (ue8m0) s ? run.template operator()<true, true>() : run.template operator()<false, true>();
  else s ? run.template operator()<true, false>() : run.template operator()<false, false>();
  return true;
}

float abs_max_avx512(const void* x, DType t, int64_t n) {
  // Two accumulators: max has a 2-cycle latency and 2 ports; more gains nothing on 128-wide
  // groups. NaNs are tracked in a mask because vmaxps drops them.
  __m512 m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
  __mmask16 nan = 0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 a = _mm512_abs_ps(load16(x, t, i, 0xFFFF)), b = _mm512_abs_ps(load16(x, t, i + 16, 0xFFFF));
    nan |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
    m0 = _mm512_max_ps(m0, a);
    m1 = _mm512_max_ps(m1, b);
  }
  for (; i < n; i += 16) {
    __m512 a = _mm512_abs_ps(load16(x, t, i, tail_mask(n - i)));
    nan |= _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    m0 = _mm512_max_ps(m0, a);
  }
  if (nan) return __builtin_nanf("");
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

void scale_to_f32_avx512(const void* x, DType t, float m, float* out, int64_t n) {
  const __m512 mv = _mm512_set1_ps(m);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = tail_mask(n - i);
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(load16(x, t, i, k), mv));
  }
}

void dequant_scale_avx512(const uint8_t* q, float s, float* out, int64_t n) {
  // e4m3 -> f32 exactly, without touching an f32 subnormal (DAZ would flush it): a normal code
  // S.EEEE.MMM becomes an f32 by moving E.M under f32's fields and adding the bias difference
  // (127 - 7) to the exponent; a subnormal code (E = 0) is MMM x 2^-9, an exact integer
  // conversion and power-of-two multiply; NaN (S.1111.111) is patched; the sign goes last.
  const __m512 sv = _mm512_set1_ps(s);
  const __m512i low7 = _mm512_set1_epi32(0x7F);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 k = tail_mask(n - i);
    __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, q + i));
    __m512i mag = _mm512_and_si512(b, low7);
    __m512 normal = _mm512_castsi512_ps(
        _mm512_add_epi32(_mm512_slli_epi32(mag, 20), _mm512_set1_epi32(120 << 23)));
    __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_and_si512(b, _mm512_set1_epi32(7))),
                               _mm512_set1_ps(0x1p-9f));
    __mmask16 is_sub = _mm512_cmplt_epi32_mask(mag, _mm512_set1_epi32(8));
    __m512 v = _mm512_mask_mov_ps(normal, is_sub, sub);
    v = _mm512_mask_mov_ps(v, _mm512_cmpeq_epi32_mask(mag, low7),
                           _mm512_castsi512_ps(_mm512_set1_epi32(0x7FF00000)));  // e4m3_to_f32(NaN)
    __m512i sign = _mm512_slli_epi32(_mm512_and_si512(b, _mm512_set1_epi32(0x80)), 24);
    v = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign));
    _mm512_mask_storeu_ps(out + i, k, _mm512_mul_ps(v, sv));
  }
}

}  // namespace sol::kernels
