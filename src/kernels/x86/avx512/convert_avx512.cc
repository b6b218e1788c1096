// AVX-512 conversions (F/BW/VL/DQ + BF16). Each step converts 64 elements: one 64-byte line of
// fp8, two of bf16/f16, four of f32, so streaming stores always write whole lines; heads and
// tails use masked loads and stores. Elements pass through f32 in four zmm registers, except on
// the way to fp8 (and e4m3 -> bf16): there every source but f32 travels in a 16-bit form that
// holds its values exactly, bf16 for bf16 and e4m3, f16 for f16 and e5m2, 32 lanes a vector.
//
// Results are bit-identical to src/core/convert.cc. Hardware conversions are used where they
// round exactly as specified there (vcvtps2ph, vcvtph2ps, vcvtneps2bf16 for normal inputs);
// the rest is integer code, table lookups, or float operations that are exact or carry their
// own rounding mode, so MXCSR (FTZ, DAZ, rounding control) cannot change a result.

// GCC 12's own _mm512_undefined_* helpers trip -Wuninitialized once inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>

#include "kernels/convert.h"
#include "kernels/x86/avx512/e4m3_avx512.h"

namespace sol::kernels {
namespace {

// Everything here stays in this anonymous namespace: an inline function or template shared
// with baseline translation units could be merged by the linker into this AVX-512 build of it.
// The per-block helpers are forced inline: GCC otherwise keeps the store step out of line and
// passes the four vectors through memory on every block (half the speed).

constexpr int64_t element_bytes(DType t) {
  return t == DType::f32 ? 4 : (t == DType::bf16 || t == DType::f16) ? 2 : 1;
}

constexpr int64_t kBlock = 64;

__m512i splat(uint32_t v) { return _mm512_set1_epi32(int(v)); }
__m512i splat16(uint16_t v) { return _mm512_set1_epi16(short(v)); }

// ---- decode ----

[[gnu::always_inline]] inline __m512 widen_bf16(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// The widening is a shift, but a signalling NaN must come out quiet (src/core/convert.cc).
// Only an f32 result needs this: every narrower target quietens NaNs itself.
[[gnu::always_inline]] inline __m512 bf16x16_to_quiet_f32(__m256i h) {
  const __m256i magnitude = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
  const __mmask16 nan = _mm256_cmpgt_epu16_mask(magnitude, _mm256_set1_epi16(0x7F80));
  return widen_bf16(_mm256_mask_mov_epi16(h, nan, _mm256_or_si256(h, _mm256_set1_epi16(0x40))));
}

[[gnu::always_inline]] inline __m512 e5m2x16_to_f32(__m128i b) {
  // e5m2 is f16 with the low 8 mantissa bits cut off, inf and NaN included.
  return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
}

template <DType From, DType To, bool kMasked>
[[gnu::always_inline]] inline __m512 load16(const uint8_t* p, __mmask16 m) {
  if constexpr (From == DType::f32) {
    return kMasked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
  } else if constexpr (From == DType::bf16 || From == DType::f16) {
    const __m256i h = kMasked ? _mm256_maskz_loadu_epi16(m, p)
                              : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (From == DType::bf16) {
      return To == DType::f32 ? bf16x16_to_quiet_f32(h) : widen_bf16(h);
    }
    return _mm512_cvtph_ps(h);
  } else {
    static_assert(From == DType::f8e5m2, "e4m3 loads 64 at a time, through bf16");
    const __m128i b = kMasked ? _mm_maskz_loadu_epi8(m, p)
                              : _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return e5m2x16_to_f32(b);
  }
}

// The 16-bit form of a source other than f32: bf16 for bf16 and e4m3, f16 for f16 and e5m2.
template <DType From>
constexpr DType kHalfForm =
    From == DType::bf16 || From == DType::f8e4m3 ? DType::bf16 : DType::f16;

template <DType From, bool kMasked>
[[gnu::always_inline]] inline void load_half64(const uint8_t* p, __mmask64 m, __m512i (&h)[2]) {
  if constexpr (From == DType::bf16 || From == DType::f16) {
    for (int half = 0; half < 2; ++half) {
      h[half] = kMasked ? _mm512_maskz_loadu_epi16(__mmask32(m >> (32 * half)), p + 64 * half)
                        : _mm512_loadu_si512(p + 64 * half);
    }
  } else {
    const __m512i bytes = kMasked ? _mm512_maskz_loadu_epi8(m, p) : _mm512_loadu_si512(p);
    for (int half = 0; half < 2; ++half) {
      const __m256i b = half ? _mm512_extracti64x4_epi64(bytes, 1) : _mm512_castsi512_si256(bytes);
      // e5m2 is f16 with the low 8 mantissa bits cut off, inf and NaN included.
      h[half] = From == DType::f8e4m3 ? e4m3x32_to_bf16(b)
                                      : _mm512_slli_epi16(_mm512_cvtepu8_epi16(b), 8);
    }
  }
}

// Loads 64 elements (only the lanes in m when masked) as four vectors of 16 f32, for a
// conversion to To.
template <DType From, DType To, bool kMasked>
[[gnu::always_inline]] inline void load64(const uint8_t* p, __mmask64 m, __m512 (&v)[4]) {
  if constexpr (From == DType::f8e4m3) {
    __m512i h[2];
    load_half64<From, kMasked>(p, m, h);
    for (int half = 0; half < 2; ++half) {
      v[2 * half] = widen_bf16(_mm512_castsi512_si256(h[half]));
      v[2 * half + 1] = widen_bf16(_mm512_extracti64x4_epi64(h[half], 1));
    }
  } else {
    for (int g = 0; g < 4; ++g) {
      const __mmask16 lanes = __mmask16(m >> (16 * g));
      v[g] = load16<From, To, kMasked>(p + 16 * g * element_bytes(From), lanes);
    }
  }
}

// ---- encode ----

[[gnu::always_inline]] inline __m256i f32x16_to_bf16(__m512 x) {
  __m256i h = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
  // vcvtneps2bf16 flushes f32 subnormals to zero; those lanes take the exact integer
  // rounding instead. They are rare in real tensors, hence the branch.
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i magnitude = _mm512_and_si512(bits, splat(0x7FFFFFFF));
  const __mmask16 subnormal =
      _mm512_cmplt_epu32_mask(_mm512_sub_epi32(magnitude, splat(1)), splat(0x007FFFFF));
  if (subnormal) {
    const __m512i lowest_kept = _mm512_and_si512(_mm512_srli_epi32(bits, 16), splat(1));
    const __m512i rounded = _mm512_add_epi32(_mm512_add_epi32(bits, splat(0x7FFF)), lowest_kept);
    h = _mm256_mask_mov_epi16(h, subnormal, _mm512_cvtepi32_epi16(_mm512_srli_epi32(rounded, 16)));
  }
  return h;
}

[[gnu::always_inline]] inline __m256i f32x16_to_f16(__m512 x) {
  return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// ---- fp8 encode ----
//
// Two versions of one rounding: from f32 in 32-bit lanes, and from a 16-bit form (bf16 or f16)
// in 16-bit lanes, twice the lanes per instruction, for every other source. Cutting f32 to
// bf16 first, rounding to odd, would let the second serve f32 too, but on Zen 5 the cut costs
// more than the wider lanes save.

// f32 -> 8-bit float with kMantissaBits and bias kBias, round to nearest even; the code lands
// in the low byte of each 32-bit lane. |x| is first clamped to kClampBits, the smallest
// magnitude that maps to the format's overflow code (e4m3: 448 -> 0x7E, saturating; e5m2:
// 65536 -> 0x7C = inf), so larger values and inf need no separate case.
template <int kMantissaBits, int kBias, uint32_t kClampBits, uint32_t kNanCode>
[[gnu::always_inline]] inline __m512i f32x16_to_fp8_format(__m512 x) {
  constexpr int kDropped = 23 - kMantissaBits;
  constexpr uint32_t kMinNormalBits = uint32_t(127 + 1 - kBias) << 23;
  constexpr float kPerSubnormalStep = float(1 << (kBias - 1 + kMantissaBits));
  constexpr uint32_t kRebiasPlusHalfMinusOne =
      (uint32_t(kBias - 127) << 23) + (uint32_t{1} << (kDropped - 1)) - 1;

  const __m512i bits = _mm512_castps_si512(x);
  const __m512i magnitude = _mm512_and_si512(bits, splat(0x7FFFFFFF));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, splat(0x7F800000));
  const __m512i clamped = _mm512_min_epu32(magnitude, splat(kClampBits));

  // Normal results: rebias the exponent and drop kDropped mantissa bits, rounding half to
  // even by adding half-minus-one plus the lowest kept bit; a carry moves into the exponent.
  const __m512i lowest_kept = _mm512_and_si512(_mm512_srli_epi32(clamped, kDropped), splat(1));
  const __m512i normal = _mm512_srli_epi32(
      _mm512_add_epi32(_mm512_add_epi32(clamped, splat(kRebiasPlusHalfMinusOne)), lowest_kept),
      kDropped);
  // Subnormal results: |x| counted in smallest-subnormal steps. The scaling by a power of two
  // is exact; the conversion to integer rounds half to even by its own rounding mode.
  const __m512 steps =
      _mm512_mul_ps(_mm512_castsi512_ps(clamped), _mm512_set1_ps(kPerSubnormalStep));
  const __m512i subnormal =
      _mm512_cvt_roundps_epi32(steps, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);

  __m512i code = _mm512_mask_mov_epi32(
      normal, _mm512_cmplt_epu32_mask(clamped, splat(kMinNormalBits)), subnormal);
  code = _mm512_mask_mov_epi32(code, nan, splat(kNanCode));
  // code | (bits >> 24 & 0x80): the sign
  return _mm512_ternarylogic_epi32(code, _mm512_srli_epi32(bits, 24), splat(0x80), 0xF8);
}

template <DType To>
[[gnu::always_inline]] inline __m512i f32x16_to_fp8(__m512 x) {
  if constexpr (To == DType::f8e4m3) return f32x16_to_fp8_format<3, 7, 0x43E00000, 0x7F>(x);
  return f32x16_to_fp8_format<2, 15, 0x47800000, 0x7E>(x);
}

// Four vectors of 32-bit codes (each below 256) -> one line of 64 bytes in element order.
[[gnu::always_inline]] inline __m512i pack_bytes(__m512i c0, __m512i c1, __m512i c2, __m512i c3) {
  // The packs work per 128-bit lane: afterwards dword 4k + j holds elements 4k..4k+3 of cj.
  const __m512i bytes =
      _mm512_packus_epi16(_mm512_packus_epi32(c0, c1), _mm512_packus_epi32(c2, c3));
  const __m512i in_order =
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(in_order, bytes);
}

// The packus instructions interleave their two sources per 128-bit lane, 8 bytes from each;
// this puts the 8-byte groups back in element order.
[[gnu::always_inline]] inline __m512i in_element_order(__m512i packed) {
  return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7), packed);
}

// 32 values of a 16-bit float format (kSrcMantissa mantissa bits, bias kSrcBias: bf16 or f16)
// -> 8-bit float with kMantissaBits and bias kBias, round to nearest even; each code in the low
// byte of its 16-bit lane. |x| is first clamped to kClampBits, the smallest magnitude that maps
// to the format's overflow code (e4m3: 448 -> 0x7E, saturating; e5m2: 65536 or f16 inf -> 0x7C,
// inf), so larger values and inf need no case of their own.
template <int kSrcMantissa, int kSrcBias, int kMantissaBits, int kBias, uint16_t kClampBits,
          uint16_t kNanCode>
[[gnu::always_inline]] inline __m512i halfx32_to_fp8_format(__m512i h) {
  constexpr int kDropped = kSrcMantissa - kMantissaBits;
  constexpr uint16_t kInfinity = uint16_t(0x7FFF & ~((1 << kSrcMantissa) - 1));
  constexpr uint16_t kMinNormal = uint16_t((kSrcBias + 1 - kBias) << kSrcMantissa);
  constexpr uint16_t kRebiasPlusHalfMinusOne =
      uint16_t(((kBias - kSrcBias) << kSrcMantissa) + (1 << (kDropped - 1)) - 1);

  const __m512i magnitude = _mm512_and_si512(h, splat16(0x7FFF));
  const __mmask32 nan = _mm512_cmpgt_epu16_mask(magnitude, splat16(kInfinity));
  const __m512i clamped = _mm512_min_epu16(magnitude, splat16(kClampBits));

  // Normal results: rebias the exponent and drop kDropped mantissa bits, rounding half to
  // even by adding half-minus-one plus the lowest kept bit; a carry moves into the exponent.
  // When source and target share the exponent field (f16 -> e5m2) this is exact for
  // subnormals too.
  const __m512i lowest_kept = _mm512_and_si512(_mm512_srli_epi16(clamped, kDropped), splat16(1));
  __m512i code = _mm512_srli_epi16(
      _mm512_add_epi16(_mm512_add_epi16(clamped, splat16(kRebiasPlusHalfMinusOne)), lowest_kept),
      kDropped);
  if constexpr (kBias != kSrcBias) {
    // Subnormal results. |x| = significand * 2^(exponent - kSrcBias - kSrcMantissa), with the
    // implicit bit in the significand, is scaled / 2^(kSrcMantissa + 1) smallest-subnormal
    // steps, scaled = significand << (exponent - kHalfSubnormalExponent): the exponent of
    // [min_subnormal / 2, min_subnormal). Smaller exponents, below anything that rounds away
    // from 0, make the shift count wrap past 15, and vpsllvw then gives 0.
    constexpr uint16_t kHalfSubnormalExponent = uint16_t(kSrcBias - kBias - kMantissaBits);
    constexpr uint16_t kMantissaMask = uint16_t((1 << kSrcMantissa) - 1);
    const __m512i shift = _mm512_sub_epi16(_mm512_srli_epi16(clamped, kSrcMantissa),
                                           splat16(kHalfSubnormalExponent));
    const __m512i significand =  // (clamped & kMantissaMask) | implicit bit
        _mm512_ternarylogic_epi32(clamped, splat16(kMantissaMask),
                                  splat16(uint16_t(kMantissaMask + 1)), 0xEA);
    const __m512i scaled = _mm512_sllv_epi16(significand, shift);
    const __m512i lowest_step =
        _mm512_and_si512(_mm512_srli_epi16(scaled, kSrcMantissa + 1), splat16(1));
    const __m512i subnormal = _mm512_srli_epi16(
        _mm512_add_epi16(_mm512_add_epi16(scaled, splat16(kMantissaMask)), lowest_step),
        kSrcMantissa + 1);
    code = _mm512_mask_mov_epi16(code, _mm512_cmplt_epu16_mask(clamped, splat16(kMinNormal)),
                                 subnormal);
  }
  code = _mm512_mask_mov_epi16(code, nan, splat16(kNanCode));
  // code | (h >> 8 & 0x80): the sign
  return _mm512_ternarylogic_epi32(code, _mm512_srli_epi16(h, 8), splat16(0x80), 0xF8);
}

// Half is the 16-bit form (bf16 or f16), To the fp8 format.
template <DType Half, DType To>
[[gnu::always_inline]] inline __m512i halfx32_to_fp8(__m512i h) {
  constexpr bool kE4m3 = To == DType::f8e4m3;
  if constexpr (Half == DType::bf16) {
    if constexpr (kE4m3) return halfx32_to_fp8_format<7, 127, 3, 7, 0x43E0, 0x7F>(h);
    return halfx32_to_fp8_format<7, 127, 2, 15, 0x4780, 0x7E>(h);
  } else {
    if constexpr (kE4m3) return halfx32_to_fp8_format<10, 15, 3, 7, 0x5F00, 0x7F>(h);
    return halfx32_to_fp8_format<10, 15, 2, 15, 0x7C00, 0x7E>(h);
  }
}

enum class Store { plain, masked, streaming };

// One 64-byte line; `byte_mask` is used by masked stores only.
template <Store kStore>
[[gnu::always_inline]] inline void store_line(uint8_t* p, __m512i v, __mmask64 byte_mask) {
  if constexpr (kStore == Store::masked) {
    _mm512_mask_storeu_epi8(p, byte_mask, v);
  } else if constexpr (kStore == Store::streaming) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v);
  } else {
    _mm512_storeu_si512(p, v);
  }
}

// A line of 32 two-byte elements; `m` has one bit per element.
template <Store kStore>
[[gnu::always_inline]] inline void store_words(uint8_t* p, __m512i v, __mmask32 m) {
  if constexpr (kStore == Store::masked) {
    _mm512_mask_storeu_epi16(p, m, v);
  } else {
    store_line<kStore>(p, v, 0);
  }
}

// 64 values in 16-bit form Half -> one line of fp8; `m` has one bit per element.
template <DType Half, DType To, Store kStore>
[[gnu::always_inline]] inline void store_fp8_64(uint8_t* p, const __m512i (&h)[2], __mmask64 m) {
  const __m512i bytes =
      _mm512_packus_epi16(halfx32_to_fp8<Half, To>(h[0]), halfx32_to_fp8<Half, To>(h[1]));
  store_line<kStore>(p, in_element_order(bytes), m);
}

// Stores 64 converted elements; `m` has one bit per element.
template <DType To, Store kStore>
[[gnu::always_inline]] inline void store64(uint8_t* p, const __m512 (&v)[4], __mmask64 m) {
  if constexpr (To == DType::f32) {
    for (int g = 0; g < 4; ++g) {
      if constexpr (kStore == Store::masked) {
        _mm512_mask_storeu_ps(p + 64 * g, __mmask16(m >> (16 * g)), v[g]);
      } else {
        store_line<kStore>(p + 64 * g, _mm512_castps_si512(v[g]), 0);
      }
    }
  } else if constexpr (To == DType::bf16 || To == DType::f16) {
    const auto encode = [](__m512 x) {
      if constexpr (To == DType::bf16) return f32x16_to_bf16(x);
      return f32x16_to_f16(x);
    };
    for (int half = 0; half < 2; ++half) {
      const __m512i line = _mm512_inserti64x4(_mm512_castsi256_si512(encode(v[2 * half])),
                                              encode(v[2 * half + 1]), 1);
      store_words<kStore>(p + 64 * half, line, __mmask32(m >> (32 * half)));
    }
  } else {
    const __m512i line = pack_bytes(f32x16_to_fp8<To>(v[0]), f32x16_to_fp8<To>(v[1]),
                                    f32x16_to_fp8<To>(v[2]), f32x16_to_fp8<To>(v[3]));
    store_line<kStore>(p, line, m);
  }
}

template <DType From, DType To, Store kStore>
[[gnu::always_inline]] inline void convert64(const uint8_t* src, uint8_t* dst, __mmask64 m) {
  constexpr bool kMasked = kStore == Store::masked;
  constexpr bool kFp8 = To == DType::f8e4m3 || To == DType::f8e5m2;
  if constexpr (From != DType::f32 && (kFp8 || (From == DType::f8e4m3 && To == DType::bf16))) {
    // No f32 step: the source's 16-bit form feeds the encoder, or is the result (e4m3 -> bf16).
    __m512i h[2];
    load_half64<From, kMasked>(src, m, h);
    if constexpr (kFp8) {
      store_fp8_64<kHalfForm<From>, To, kStore>(dst, h, m);
    } else {
      store_words<kStore>(dst, h[0], __mmask32(m));
      store_words<kStore>(dst + 64, h[1], __mmask32(m >> 32));
    }
  } else {
    __m512 v[4];
    load64<From, To, kMasked>(src, m, v);
    store64<To, kStore>(dst, v, m);
  }
}

__mmask64 first_lanes(int64_t count) {
  return count >= 64 ? ~__mmask64{0} : (__mmask64{1} << count) - 1;
}

int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Elements to convert before dst + i * bytes is 64-byte aligned (dst is element-aligned).
int64_t elements_to_line(const uint8_t* dst, int64_t bytes) {
  return int64_t((64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64) / bytes;
}

void copy_short(const uint8_t* src, uint8_t* dst, int64_t bytes) {
  const __mmask64 m = first_lanes(bytes);
  _mm512_mask_storeu_epi8(dst, m, _mm512_maskz_loadu_epi8(m, src));
}

void stream_copy(const uint8_t* src, uint8_t* dst, int64_t bytes) {
  const int64_t head = min64(bytes, elements_to_line(dst, 1));
  copy_short(src, dst, head);
  int64_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), _mm512_loadu_si512(src + i));
  }
  copy_short(src + i, dst + i, bytes - i);
  _mm_sfence();
}

// Streaming from DRAM, the hardware prefetchers alone leave the read side short of the copy
// rate once a block carries real work (f32 -> e4m3 gained 15-20% from this on Zen 5); how far
// ahead is the caller's (cast: TuningParams::pass_prefetch_bytes). A second look-ahead into L2
// (cast_l2_prefetch_bytes) keeps more lines in flight than L1's miss buffers hold, which the
// reads of a cast from f32 need on the Emerald Rapids guest (docs/perf/layer-ops.md).
struct Ahead {
  int64_t l1 = 0, l2 = 0;
};

[[gnu::always_inline]] inline void prefetch_ahead(const uint8_t* block, Ahead ahead, int64_t lines) {
  if (ahead.l1 > 0)
    for (int64_t line = 0; line < lines; ++line)
      _mm_prefetch(reinterpret_cast<const char*>(block + ahead.l1 + 64 * line), _MM_HINT_T0);
  if (ahead.l2 > 0)
    for (int64_t line = 0; line < lines; ++line)
      _mm_prefetch(reinterpret_cast<const char*>(block + ahead.l2 + 64 * line), _MM_HINT_T1);
}

// Full blocks with ordinary stores, then a masked block for the rest.
template <DType From, DType To>
void convert_with_plain_stores(const uint8_t* src, uint8_t* dst, int64_t n) {
  constexpr int64_t kIn = element_bytes(From);
  constexpr int64_t kOut = element_bytes(To);
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    convert64<From, To, Store::plain>(src + i * kIn, dst + i * kOut, 0);
  }
  if (i < n) convert64<From, To, Store::masked>(src + i * kIn, dst + i * kOut, first_lanes(n - i));
}

template <DType From, DType To>
void convert_pair(const uint8_t* src, uint8_t* dst, int64_t n, bool nontemporal, Ahead ahead) {
  constexpr int64_t kIn = element_bytes(From);
  constexpr int64_t kOut = element_bytes(To);
  if (!nontemporal || reinterpret_cast<uintptr_t>(dst) % kOut != 0) {
    return convert_with_plain_stores<From, To>(src, dst, n);
  }
  const int64_t head = min64(n, elements_to_line(dst, kOut));
  convert_with_plain_stores<From, To>(src, dst, head);
  int64_t i = head;
  for (; i + kBlock <= n; i += kBlock) {
    prefetch_ahead(src + i * kIn, ahead, kIn);
    convert64<From, To, Store::streaming>(src + i * kIn, dst + i * kOut, 0);
  }
  convert_with_plain_stores<From, To>(src + i * kIn, dst + i * kOut, n - i);
  _mm_sfence();
}

// The identity pair is a copy; every other pair converts.
template <DType From, DType To>
void convert_or_copy(const uint8_t* src, uint8_t* dst, int64_t n, bool nontemporal, Ahead ahead) {
  if constexpr (From == To) {
    if (nontemporal) return stream_copy(src, dst, n * element_bytes(From));
    std::memcpy(dst, src, size_t(n * element_bytes(From)));
  } else {
    convert_pair<From, To>(src, dst, n, nontemporal, ahead);
  }
}

template <DType From>
void convert_from(const uint8_t* src, uint8_t* dst, DType to, int64_t n, bool nontemporal, Ahead ahead) {
  switch (to) {
    case DType::f32: return convert_or_copy<From, DType::f32>(src, dst, n, nontemporal, ahead);
    case DType::bf16: return convert_or_copy<From, DType::bf16>(src, dst, n, nontemporal, ahead);
    case DType::f16: return convert_or_copy<From, DType::f16>(src, dst, n, nontemporal, ahead);
    case DType::f8e4m3: return convert_or_copy<From, DType::f8e4m3>(src, dst, n, nontemporal, ahead);
    case DType::f8e5m2: return convert_or_copy<From, DType::f8e5m2>(src, dst, n, nontemporal, ahead);
    default: return;
  }
}

}  // namespace

void convert_avx512(const void* src, DType from, void* dst, DType to, int64_t n, bool nontemporal,
                    int64_t prefetch_bytes, int64_t l2_prefetch_bytes) {
  const Ahead ahead{prefetch_bytes, l2_prefetch_bytes};
  if (!convert_supported(from, to)) return convert_scalar(src, from, dst, to, n);
  if (n <= 0) return;
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  switch (from) {
    case DType::f32: return convert_from<DType::f32>(in, out, to, n, nontemporal, ahead);
    case DType::bf16: return convert_from<DType::bf16>(in, out, to, n, nontemporal, ahead);
    case DType::f16: return convert_from<DType::f16>(in, out, to, n, nontemporal, ahead);
    case DType::f8e4m3: return convert_from<DType::f8e4m3>(in, out, to, n, nontemporal, ahead);
    case DType::f8e5m2: return convert_from<DType::f8e5m2>(in, out, to, n, nontemporal, ahead);
    default: return;
  }
}

}  // namespace sol::kernels
