// AVX2 + F16C conversions. Each step converts 32 elements through f32 held in four ymm
// registers (one 32-byte store of fp8, two of bf16/f16, four of f32). Without mask registers,
// partial blocks (the tail, and the head that aligns dst for streaming) are converted through
// a small stack buffer, so nothing outside dst[0, n) is ever written.
//
// Results are bit-identical to src/core/convert.cc: vcvtps2ph / vcvtph2ps for f16 (they round
// exactly as specified), integer code for bf16 and fp8. Float operations used are either exact
// or carry their own rounding mode, so MXCSR (FTZ, DAZ, rounding control) cannot change a result.
#include <immintrin.h>

#include <cstring>

#include "kernels/convert.h"
#include "kernels/x86/avx2/codes_avx2.h"

namespace sol::kernels {
namespace {

// Everything here stays in this anonymous namespace: an inline function or template shared
// with baseline translation units could be merged by the linker into this AVX2 build of it.
// The per-block helpers are forced inline: GCC otherwise keeps the store step out of line and
// passes the four vectors through memory on every block.

constexpr int64_t element_bytes(DType t) {
  return t == DType::f32 ? 4 : (t == DType::bf16 || t == DType::f16) ? 2 : 1;
}

constexpr int64_t kBlock = 32;

__m256i splat(uint32_t v) { return _mm256_set1_epi32(int(v)); }

__m256i select(__m256i mask, __m256i if_set, __m256i if_clear) {
  return _mm256_blendv_epi8(if_clear, if_set, mask);
}

// ---- decode ----

[[gnu::always_inline]] inline __m256 widen_bf16(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// The widening is a shift, but a signalling NaN must come out quiet (src/core/convert.cc).
// Only an f32 result needs this: every narrower target quietens NaNs itself.
[[gnu::always_inline]] inline __m256 bf16x8_to_quiet_f32(__m128i h) {
  // Both sides of the compare are below 0x8000, so the signed compare is an unsigned one.
  const __m128i magnitude = _mm_and_si128(h, _mm_set1_epi16(0x7FFF));
  const __m128i nan = _mm_cmpgt_epi16(magnitude, _mm_set1_epi16(0x7F80));
  return widen_bf16(_mm_or_si128(h, _mm_and_si128(nan, _mm_set1_epi16(0x0040))));
}

[[gnu::always_inline]] inline __m256 e5m2x8_to_f32(__m128i b) {
  // e5m2 is f16 with the low 8 mantissa bits cut off, inf and NaN included.
  return _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b), 8));
}

template <DType From, DType To>
[[gnu::always_inline]] inline __m256 load8(const uint8_t* p) {
  if constexpr (From == DType::f32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (From == DType::bf16 || From == DType::f16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (From == DType::bf16) {
      return To == DType::f32 ? bf16x8_to_quiet_f32(h) : widen_bf16(h);
    }
    return _mm256_cvtph_ps(h);
  } else {
    return e5m2x8_to_f32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
}

// Loads 32 elements as four groups of 8 f32, for a conversion to To.
template <DType From, DType To>
[[gnu::always_inline]] inline void load_block(const uint8_t* p, __m256 (&v)[4]) {
  if constexpr (From == DType::f8e4m3) {
    for (int pair = 0; pair < 2; ++pair) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * pair));
      e4m3x16_to_f32(b, v[2 * pair], v[2 * pair + 1]);
    }
  } else {
    for (int g = 0; g < 4; ++g) v[g] = load8<From, To>(p + 8 * g * element_bytes(From));
  }
}

// ---- encode: 8 f32 lanes -> 8 codes, one per 32-bit lane (f16: packed) ----

[[gnu::always_inline]] inline __m128i f32x8_to_f16(__m256 x) {
  return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// f32 -> 8-bit float with kMantissaBits and bias kBias, round to nearest even. |x| is first
// clamped to kClampBits, the smallest magnitude that maps to the format's overflow code
// (e4m3: 448 -> 0x7E, saturating; e5m2: 65536 -> 0x7C = inf), so larger values and inf need
// no separate case.
template <int kMantissaBits, int kBias, uint32_t kClampBits, uint32_t kNanCode>
[[gnu::always_inline]] inline __m256i f32x8_to_fp8_format(__m256 x) {
  constexpr int kDropped = 23 - kMantissaBits;
  constexpr uint32_t kMinNormalBits = uint32_t(127 + 1 - kBias) << 23;
  constexpr float kPerSubnormalStep = float(1 << (kBias - 1 + kMantissaBits));
  constexpr uint32_t kRebiasPlusHalfMinusOne =
      (uint32_t(kBias - 127) << 23) + (uint32_t{1} << (kDropped - 1)) - 1;

  const __m256i bits = _mm256_castps_si256(x);
  const __m256i magnitude = _mm256_and_si256(bits, splat(0x7FFFFFFF));
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), splat(0x80));
  // magnitude and the constants are below 2^31: signed compares are unsigned ones here.
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, splat(0x7F800000));
  const __m256i clamped = _mm256_min_epu32(magnitude, splat(kClampBits));

  // Normal results: rebias the exponent and drop kDropped mantissa bits, rounding half to
  // even by adding half-minus-one plus the lowest kept bit; a carry moves into the exponent.
  const __m256i lowest_kept = _mm256_and_si256(_mm256_srli_epi32(clamped, kDropped), splat(1));
  const __m256i normal = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(clamped, splat(kRebiasPlusHalfMinusOne)), lowest_kept),
      kDropped);
  // Subnormal results: |x| counted in smallest-subnormal steps. The scaling by a power of two
  // is exact; vroundps rounds half to even by its immediate, not by MXCSR.
  const __m256 steps = _mm256_round_ps(
      _mm256_mul_ps(_mm256_castsi256_ps(clamped), _mm256_set1_ps(kPerSubnormalStep)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256i subnormal = _mm256_cvttps_epi32(steps);

  __m256i code = select(_mm256_cmpgt_epi32(splat(kMinNormalBits), clamped), subnormal, normal);
  code = select(nan, splat(kNanCode), code);
  return _mm256_or_si256(code, sign);
}

template <DType To>
[[gnu::always_inline]] inline __m256i f32x8_to_fp8(__m256 x) {
  if constexpr (To == DType::f8e4m3) return f32x8_to_fp8_format<3, 7, 0x43E00000, 0x7F>(x);
  return f32x8_to_fp8_format<2, 15, 0x47800000, 0x7E>(x);
}

template <bool kStreaming>
[[gnu::always_inline]] inline void store32(uint8_t* p, __m256i v) {
  if constexpr (kStreaming) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }
}

// Stores 32 converted elements. kExactInBf16: every value is a bf16 already (an e4m3 source),
// so a bf16 target is just the top half of each f32.
template <DType To, bool kStreaming, bool kExactInBf16>
[[gnu::always_inline]] inline void store_block(uint8_t* p, const __m256 (&v)[4]) {
  if constexpr (To == DType::f32) {
    for (int g = 0; g < 4; ++g) store32<kStreaming>(p + 32 * g, _mm256_castps_si256(v[g]));
  } else if constexpr (To == DType::f16) {
    store32<kStreaming>(p, _mm256_set_m128i(f32x8_to_f16(v[1]), f32x8_to_f16(v[0])));
    store32<kStreaming>(p + 32, _mm256_set_m128i(f32x8_to_f16(v[3]), f32x8_to_f16(v[2])));
  } else if constexpr (To == DType::bf16) {
    // packus interleaves the 128-bit lanes; the permute puts the four quarters back in order.
    const auto encode = [](__m256 x) {
      if constexpr (kExactInBf16) return _mm256_srli_epi32(_mm256_castps_si256(x), 16);
      return f32x8_to_bf16(x);
    };
    for (int half = 0; half < 2; ++half) {
      const __m256i packed = _mm256_packus_epi32(encode(v[2 * half]), encode(v[2 * half + 1]));
      store32<kStreaming>(p + 32 * half, _mm256_permute4x64_epi64(packed, 0xD8));
    }
  } else {
    const __m256i words01 = _mm256_packus_epi32(f32x8_to_fp8<To>(v[0]), f32x8_to_fp8<To>(v[1]));
    const __m256i words23 = _mm256_packus_epi32(f32x8_to_fp8<To>(v[2]), f32x8_to_fp8<To>(v[3]));
    // After the two lane-wise packs dword k holds elements of group k % 4, lane k / 4.
    const __m256i bytes = _mm256_packus_epi16(words01, words23);
    const __m256i in_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    store32<kStreaming>(p, _mm256_permutevar8x32_epi32(bytes, in_order));
  }
}

template <DType From, DType To, bool kStreaming>
[[gnu::always_inline]] inline void convert_block(const uint8_t* src, uint8_t* dst) {
  __m256 v[4];
  load_block<From, To>(src, v);
  store_block<To, kStreaming, From == DType::f8e4m3>(dst, v);
}

// Fewer than kBlock elements, through zero-padded stack buffers.
template <DType From, DType To>
void convert_partial_block(const uint8_t* src, uint8_t* dst, int64_t count) {
  alignas(32) uint8_t in[kBlock * 4] = {};
  alignas(32) uint8_t out[kBlock * 4];
  std::memcpy(in, src, size_t(count * element_bytes(From)));
  convert_block<From, To, false>(in, out);
  std::memcpy(dst, out, size_t(count * element_bytes(To)));
}

int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Elements to convert before dst + i * bytes is 64-byte aligned (dst is element-aligned).
int64_t elements_to_line(const uint8_t* dst, int64_t bytes) {
  return int64_t((64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64) / bytes;
}

void stream_copy(const uint8_t* src, uint8_t* dst, int64_t bytes) {
  const int64_t head = min64(bytes, elements_to_line(dst, 1));
  std::memcpy(dst, src, size_t(head));
  int64_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    store32<true>(dst + i, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    store32<true>(dst + i + 32, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32)));
  }
  std::memcpy(dst + i, src + i, size_t(bytes - i));
  _mm_sfence();
}

// Streaming from DRAM, the hardware prefetchers alone leave the read side short of the copy
// rate once a block carries real work; how far ahead is the caller's
// (cast: TuningParams::pass_prefetch_bytes).
[[gnu::always_inline]] inline void prefetch_ahead(const uint8_t* block, int64_t ahead, int64_t lines) {
  for (int64_t line = 0; line < lines; ++line) {
    _mm_prefetch(reinterpret_cast<const char*>(block + ahead + 64 * line), _MM_HINT_T0);
  }
}

// Full blocks with ordinary stores, then the rest through the stack buffers.
template <DType From, DType To>
void convert_with_plain_stores(const uint8_t* src, uint8_t* dst, int64_t n) {
  constexpr int64_t kIn = element_bytes(From);
  constexpr int64_t kOut = element_bytes(To);
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    convert_block<From, To, false>(src + i * kIn, dst + i * kOut);
  }
  if (i < n) convert_partial_block<From, To>(src + i * kIn, dst + i * kOut, n - i);
}

template <DType From, DType To>
void convert_pair(const uint8_t* src, uint8_t* dst, int64_t n, bool nontemporal, int64_t ahead) {
  constexpr int64_t kIn = element_bytes(From);
  constexpr int64_t kOut = element_bytes(To);
  if (!nontemporal || reinterpret_cast<uintptr_t>(dst) % kOut != 0) {
    return convert_with_plain_stores<From, To>(src, dst, n);
  }
  const int64_t head = min64(n, elements_to_line(dst, kOut));
  convert_with_plain_stores<From, To>(src, dst, head);
  int64_t i = head;
  for (; i + kBlock <= n; i += kBlock) {
    if (ahead > 0) prefetch_ahead(src + i * kIn, ahead, (kBlock * kIn + 63) / 64);
    convert_block<From, To, true>(src + i * kIn, dst + i * kOut);
  }
  convert_with_plain_stores<From, To>(src + i * kIn, dst + i * kOut, n - i);
  _mm_sfence();
}

// The identity pair is a copy; every other pair converts.
template <DType From, DType To>
void convert_or_copy(const uint8_t* src, uint8_t* dst, int64_t n, bool nontemporal, int64_t ahead) {
  if constexpr (From == To) {
    if (nontemporal) return stream_copy(src, dst, n * element_bytes(From));
    std::memcpy(dst, src, size_t(n * element_bytes(From)));
  } else {
    convert_pair<From, To>(src, dst, n, nontemporal, ahead);
  }
}

template <DType From>
void convert_from(const uint8_t* src, uint8_t* dst, DType to, int64_t n, bool nontemporal, int64_t ahead) {
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

void convert_avx2(const void* src, DType from, void* dst, DType to, int64_t n, bool nontemporal,
                  int64_t prefetch_bytes) {
  if (!convert_supported(from, to)) return convert_scalar(src, from, dst, to, n);
  if (n <= 0) return;
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  switch (from) {
    case DType::f32: return convert_from<DType::f32>(in, out, to, n, nontemporal, prefetch_bytes);
    case DType::bf16: return convert_from<DType::bf16>(in, out, to, n, nontemporal, prefetch_bytes);
    case DType::f16: return convert_from<DType::f16>(in, out, to, n, nontemporal, prefetch_bytes);
    case DType::f8e4m3: return convert_from<DType::f8e4m3>(in, out, to, n, nontemporal, prefetch_bytes);
    case DType::f8e5m2: return convert_from<DType::f8e5m2>(in, out, to, n, nontemporal, prefetch_bytes);
    default: return;
  }
}

}  // namespace sol::kernels
