// AVX-512 conversions (F/BW/VL/DQ + BF16). Each step converts 64 elements through f32 held in
// four zmm registers: one 64-byte line of fp8, two of bf16/f16, four of f32, so streaming
// stores always write whole lines. Heads and tails use masked loads and stores.
//
// Results are bit-identical to src/core/convert.cc. Hardware conversions are used where they
// round exactly as specified there (vcvtps2ph, vcvtph2ps, vcvtneps2bf16 for normal inputs);
// the rest is integer code or float operations that are exact or carry their own rounding
// mode, so MXCSR (FTZ, DAZ, rounding control) cannot change a result.
// GCC 12's own _mm512_undefined_* helpers trip -Wuninitialized once inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstring>

#include "kernels/convert.h"

namespace sol::kernels {
namespace {

// Everything here stays in this anonymous namespace: an inline function or template shared
// with baseline translation units could be merged by the linker into this AVX-512 build of it.
constexpr int64_t element_bytes(DType t) {
  return t == DType::f32 ? 4 : (t == DType::bf16 || t == DType::f16) ? 2 : 1;
}

constexpr int64_t kBlock = 64;

// The per-block helpers below are forced inline: GCC otherwise keeps the store step out of
// line and passes the four vectors through memory on every block (half the speed).

__m512i splat(uint32_t v) { return _mm512_set1_epi32(int(v)); }

// ---- decode: 16 elements -> 16 f32 lanes ----

[[gnu::always_inline]] inline __m512 bf16x16_to_f32(__m256i h) {
  // The widening is a shift, but a signalling NaN must come out quiet (src/core/convert.cc).
  const __m256i magnitude = _mm256_and_si256(h, _mm256_set1_epi16(0x7FFF));
  const __mmask16 nan = _mm256_cmpgt_epu16_mask(magnitude, _mm256_set1_epi16(0x7F80));
  h = _mm256_mask_mov_epi16(h, nan, _mm256_or_si256(h, _mm256_set1_epi16(0x0040)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

[[gnu::always_inline]] inline __m512 e5m2x16_to_f32(__m128i b) {
  // e5m2 is f16 with the low 8 mantissa bits cut off, inf and NaN included.
  return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
}

[[gnu::always_inline]] inline __m512 e4m3x16_to_f32(__m128i b) {
  const __m512i byte = _mm512_cvtepu8_epi32(b);
  const __m512i magnitude = _mm512_and_si512(byte, splat(0x7F));
  const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(byte, splat(0x80)), 24);
  // Normals: exponent and mantissa slide under the f32 fields, bias 7 becomes 127.
  __m512i bits = _mm512_add_epi32(_mm512_slli_epi32(magnitude, 20), splat((127 - 7) << 23));
  // Subnormals are mantissa * 2^-9: an exact product of normal floats.
  const __m512 subnormal = _mm512_mul_ps(_mm512_cvtepi32_ps(magnitude), _mm512_set1_ps(0x1p-9f));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmplt_epu32_mask(magnitude, splat(8)),
                               _mm512_castps_si512(subnormal));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(magnitude, splat(0x7F)),
                               splat(0x7FF00000));
  return _mm512_castsi512_ps(_mm512_or_si512(bits, sign));
}

template <DType From, bool kMasked>
[[gnu::always_inline]] inline __m512 load16(const uint8_t* p, __mmask16 m) {
  if constexpr (From == DType::f32) {
    return kMasked ? _mm512_maskz_loadu_ps(m, p) : _mm512_loadu_ps(p);
  } else if constexpr (From == DType::bf16 || From == DType::f16) {
    const __m256i h = kMasked ? _mm256_maskz_loadu_epi16(m, p)
                              : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (From == DType::bf16) return bf16x16_to_f32(h);
    return _mm512_cvtph_ps(h);
  } else {
    const __m128i b = kMasked ? _mm_maskz_loadu_epi8(m, p)
                              : _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (From == DType::f8e5m2) return e5m2x16_to_f32(b);
    return e4m3x16_to_f32(b);
  }
}

// ---- encode: 16 f32 lanes -> 16 elements ----

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

// f32 -> 8-bit float with kMantissaBits and bias kBias, round to nearest even. |x| is first
// clamped to kClampBits, the smallest magnitude that maps to the format's overflow code
// (e4m3: 448 -> 0x7E, saturating; e5m2: 65536 -> 0x7C = inf), so larger values and inf need
// no separate case.
template <int kMantissaBits, int kBias, uint32_t kClampBits, uint32_t kNanCode>
[[gnu::always_inline]] inline __m128i f32x16_to_fp8(__m512 x) {
  constexpr int kDropped = 23 - kMantissaBits;
  constexpr uint32_t kMinNormalBits = uint32_t(127 + 1 - kBias) << 23;
  constexpr float kPerSubnormalStep = float(1 << (kBias - 1 + kMantissaBits));
  constexpr uint32_t kRebiasPlusHalfMinusOne =
      (uint32_t(kBias - 127) << 23) + (uint32_t{1} << (kDropped - 1)) - 1;

  const __m512i bits = _mm512_castps_si512(x);
  const __m512i magnitude = _mm512_and_si512(bits, splat(0x7FFFFFFF));
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(bits, 24), splat(0x80));
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
  return _mm512_cvtepi32_epi8(_mm512_or_si512(code, sign));
}

[[gnu::always_inline]] inline __m128i f32x16_to_e4m3(__m512 x) {
  return f32x16_to_fp8<3, 7, 0x43E00000, 0x7F>(x);
}
[[gnu::always_inline]] inline __m128i f32x16_to_e5m2(__m512 x) {
  return f32x16_to_fp8<2, 15, 0x47800000, 0x7E>(x);
}

enum class Store { plain, masked, streaming };

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
      if constexpr (kStore == Store::masked) {
        _mm512_mask_storeu_epi16(p + 64 * half, __mmask32(m >> (32 * half)), line);
      } else {
        store_line<kStore>(p + 64 * half, line, 0);
      }
    }
  } else {
    const auto encode = [](__m512 x) {
      if constexpr (To == DType::f8e4m3) return f32x16_to_e4m3(x);
      return f32x16_to_e5m2(x);
    };
    __m512i line = _mm512_castsi128_si512(encode(v[0]));
    line = _mm512_inserti32x4(line, encode(v[1]), 1);
    line = _mm512_inserti32x4(line, encode(v[2]), 2);
    line = _mm512_inserti32x4(line, encode(v[3]), 3);
    store_line<kStore>(p, line, m);
  }
}

template <DType From, DType To, Store kStore>
[[gnu::always_inline]] inline void convert64(const uint8_t* src, uint8_t* dst, __mmask64 m) {
  constexpr bool kMasked = kStore == Store::masked;
  __m512 v[4];
  for (int g = 0; g < 4; ++g) {
    v[g] = load16<From, kMasked>(src + 16 * g * element_bytes(From), __mmask16(m >> (16 * g)));
  }
  store64<To, kStore>(dst, v, m);
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
void convert_pair(const uint8_t* src, uint8_t* dst, int64_t n, bool nontemporal) {
  constexpr int64_t kIn = element_bytes(From);
  constexpr int64_t kOut = element_bytes(To);
  if (!nontemporal || reinterpret_cast<uintptr_t>(dst) % kOut != 0) {
    return convert_with_plain_stores<From, To>(src, dst, n);
  }
  const int64_t head = min64(n, elements_to_line(dst, kOut));
  convert_with_plain_stores<From, To>(src, dst, head);
  int64_t i = head;
  for (; i + kBlock <= n; i += kBlock) {
    convert64<From, To, Store::streaming>(src + i * kIn, dst + i * kOut, 0);
  }
  convert_with_plain_stores<From, To>(src + i * kIn, dst + i * kOut, n - i);
  _mm_sfence();
}

// The identity pair is a copy; every other pair converts.
template <DType From, DType To>
void convert_or_copy(const uint8_t* src, uint8_t* dst, int64_t n, bool nontemporal) {
  if constexpr (From == To) {
    if (nontemporal) return stream_copy(src, dst, n * element_bytes(From));
    std::memcpy(dst, src, size_t(n * element_bytes(From)));
  } else {
    convert_pair<From, To>(src, dst, n, nontemporal);
  }
}

template <DType From>
void convert_from(const uint8_t* src, uint8_t* dst, DType to, int64_t n, bool nontemporal) {
  switch (to) {
    case DType::f32: return convert_or_copy<From, DType::f32>(src, dst, n, nontemporal);
    case DType::bf16: return convert_or_copy<From, DType::bf16>(src, dst, n, nontemporal);
    case DType::f16: return convert_or_copy<From, DType::f16>(src, dst, n, nontemporal);
    case DType::f8e4m3: return convert_or_copy<From, DType::f8e4m3>(src, dst, n, nontemporal);
    case DType::f8e5m2: return convert_or_copy<From, DType::f8e5m2>(src, dst, n, nontemporal);
    default: return;
  }
}

}  // namespace

void convert_avx512(const void* src, DType from, void* dst, DType to, int64_t n,
                    bool nontemporal) {
  if (!convert_supported(from, to)) return convert_scalar(src, from, dst, to, n);
  if (n <= 0) return;
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  switch (from) {
    case DType::f32: return convert_from<DType::f32>(in, out, to, n, nontemporal);
    case DType::bf16: return convert_from<DType::bf16>(in, out, to, n, nontemporal);
    case DType::f16: return convert_from<DType::f16>(in, out, to, n, nontemporal);
    case DType::f8e4m3: return convert_from<DType::f8e4m3>(in, out, to, n, nontemporal);
    case DType::f8e5m2: return convert_from<DType::f8e5m2>(in, out, to, n, nontemporal);
    default: return;
  }
}

}  // namespace sol::kernels
