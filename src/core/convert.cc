// Exact scalar conversions between f32 (and f64) and the narrow float formats, and generic
// element access. This file is the specification: the vector kernels in src/kernels/x86
// reproduce it bit for bit, and tests/core/test_convert.cc checks it against an independent
// reference.
//
// Every conversion unpacks the source into sign * significand * 2^exponent (or inf / NaN) and
// packs that into the target with a single rounding. Only integer arithmetic is used, so the
// result does not depend on the floating-point environment (MXCSR rounding mode, FTZ, DAZ).
//
// Rounding: to nearest, ties to the even code. Subnormals of the target are produced exactly,
// including values that round up into the smallest normal; signed zero keeps its sign.
//
// Overflow:
//   bf16, f16, f8e5m2: a magnitude at or above the midpoint between the largest finite value
//     and the next power of two rounds to inf (f16: >= 65520; e5m2: >= 61440, max 57344).
//   f8e4m3 (OCP e4m3fn, no infinities): every finite magnitude above 448, and inf, become 448.
//
// NaN: a conversion between two different formats never returns a signalling NaN and always
// keeps the sign.
//   to f32, bf16, f16: exponent all ones, quiet bit (the top mantissa bit) set, the remaining
//     mantissa bits are the top bits of the source payload (truncated, or zero-extended).
//     vcvtneps2bf16, vcvtps2ph and vcvtph2ps do exactly this (checked on Zen 5). Note that
//     bf16 -> f32 is therefore a 16-bit shift except for signalling NaNs, which get quietened.
//   to f8e5m2: sign | 0x7E (quiet bit only, payload dropped).
//   to f8e4m3: sign | 0x7F, the format's only NaN.
//   Decoded: e4m3 NaN -> sign | 0x7FF00000; e5m2 0x7D, 0x7E, 0x7F -> sign | 0x7FE00000,
//   0x7FC00000, 0x7FE00000.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "sol/dtype.h"
#include "sol/error.h"

namespace sol {
namespace {

enum class NanRule { keep_payload, quiet_only, all_ones };

// sign | exponent | mantissa with bias 2^(exponent_bits-1) - 1.
struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;
  bool has_infinity;  // false (e4m3fn): the all-ones exponent also holds finite values
  NanRule nan_rule;

  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint64_t exponent_mask() const { return (uint64_t{1} << exponent_bits) - 1; }
  uint64_t mantissa_mask() const { return (uint64_t{1} << mantissa_bits) - 1; }
  uint64_t sign_bit() const { return uint64_t{1} << (exponent_bits + mantissa_bits); }
  uint64_t infinity_code() const { return exponent_mask() << mantissa_bits; }
  uint64_t max_finite_code() const {
    return has_infinity ? infinity_code() - 1 : infinity_code() | (mantissa_mask() - 1);
  }
};

constexpr FloatFormat kF64{11, 52, true, NanRule::keep_payload};
constexpr FloatFormat kF32{8, 23, true, NanRule::keep_payload};
constexpr FloatFormat kBF16{8, 7, true, NanRule::keep_payload};
constexpr FloatFormat kF16{5, 10, true, NanRule::keep_payload};
constexpr FloatFormat kE4M3{4, 3, false, NanRule::all_ones};
constexpr FloatFormat kE5M2{5, 2, true, NanRule::quiet_only};

struct Unpacked {
  enum class Kind { finite, infinity, nan } kind;
  bool negative;
  uint64_t significand;  // finite: |value| = significand * 2^exponent
  int exponent;
  uint64_t payload;  // nan: the mantissa bits, left-aligned at bit 63
};

Unpacked unpack(uint64_t bits, const FloatFormat& f) {
  const int m = f.mantissa_bits;
  const uint64_t exponent_field = (bits >> m) & f.exponent_mask();
  const uint64_t mantissa = bits & f.mantissa_mask();
  Unpacked u{Unpacked::Kind::finite, (bits & f.sign_bit()) != 0, 0, 0, 0};
  const bool special = exponent_field == f.exponent_mask() &&
                       (f.has_infinity || mantissa == f.mantissa_mask());
  if (special) {
    u.kind = f.has_infinity && mantissa == 0 ? Unpacked::Kind::infinity : Unpacked::Kind::nan;
    u.payload = mantissa << (64 - m);
  } else if (exponent_field == 0) {
    u.significand = mantissa;
    u.exponent = 1 - f.bias() - m;
  } else {
    u.significand = mantissa | (uint64_t{1} << m);
    u.exponent = int(exponent_field) - f.bias() - m;
  }
  return u;
}

uint64_t shift_right_round_even(uint64_t v, int shift) {
  // v has at most 53 significant bits, so for shifts this large it is below half a unit.
  if (shift >= 64) return 0;
  const uint64_t kept = v >> shift;
  const uint64_t rest = v & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1))) ? 1 : 0);
}

// Code of significand * 2^exponent rounded into f, before the sign is applied.
uint64_t round_magnitude(uint64_t significand, int exponent, const FloatFormat& f) {
  if (significand == 0) return 0;
  const int m = f.mantissa_bits;
  const int leading = exponent + int(std::bit_width(significand)) - 1;  // floor(log2 |value|)
  // Subnormals are spaced like the smallest normal binade.
  const int binade = std::max(leading, 1 - f.bias());
  const int quantum = binade - m;  // the result is a multiple of 2^quantum
  const uint64_t steps = exponent >= quantum
                             ? significand << (exponent - quantum)
                             : shift_right_round_even(significand, quantum - exponent);
  // steps includes the implicit bit for normals, so adding (biased binade - 1) << m gives the
  // code; a rounding carry into the next binade (or into inf) falls out of the same addition.
  const uint64_t code = (uint64_t(binade + f.bias() - 1) << m) + steps;
  return std::min(code, f.has_infinity ? f.infinity_code() : f.max_finite_code());
}

uint64_t nan_code(uint64_t payload, const FloatFormat& f) {
  const int m = f.mantissa_bits;
  const uint64_t quiet = uint64_t{1} << (m - 1);
  switch (f.nan_rule) {
    case NanRule::keep_payload: return f.infinity_code() | quiet | (payload >> (64 - m));
    case NanRule::quiet_only: return f.infinity_code() | quiet;
    case NanRule::all_ones: return f.infinity_code() | f.mantissa_mask();
  }
  return 0;
}

uint64_t pack(const Unpacked& u, const FloatFormat& f) {
  const uint64_t sign = u.negative ? f.sign_bit() : 0;
  switch (u.kind) {
    case Unpacked::Kind::nan: return sign | nan_code(u.payload, f);
    case Unpacked::Kind::infinity:
      return sign | (f.has_infinity ? f.infinity_code() : f.max_finite_code());
    case Unpacked::Kind::finite: return sign | round_magnitude(u.significand, u.exponent, f);
  }
  return 0;
}

uint64_t convert_bits(uint64_t bits, const FloatFormat& from, const FloatFormat& to) {
  return pack(unpack(bits, from), to);
}

float widen_to_f32(uint32_t bits, const FloatFormat& f) {
  return std::bit_cast<float>(uint32_t(convert_bits(bits, f, kF32)));
}

uint64_t narrow_from_f32(float x, const FloatFormat& f) {
  return convert_bits(std::bit_cast<uint32_t>(x), kF32, f);
}

template <class T>
T load_element(const void* base, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void store_element(void* base, size_t i, T v) {
  std::memcpy(static_cast<char*>(base) + i * sizeof(T), &v, sizeof(T));
}

template <class Bits>
double widen_to_double(const void* base, size_t i, const FloatFormat& f) {
  return std::bit_cast<double>(convert_bits(load_element<Bits>(base, i), f, kF64));
}

template <class Bits>
void narrow_from_double(void* base, size_t i, double v, const FloatFormat& f) {
  store_element(base, i, Bits(convert_bits(std::bit_cast<uint64_t>(v), kF64, f)));
}

// Round to nearest (ties to even) and clamp to [lo, hi]; NaN becomes 0.
int64_t round_saturate(double v, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return 0;
  if (v <= double(lo)) return lo;
  if (v >= double(hi)) return hi;
  const double whole = std::floor(v);
  const double fraction = v - whole;  // exact for every double
  int64_t r = int64_t(whole);
  if (fraction > 0.5 || (fraction == 0.5 && (r & 1))) ++r;
  return std::min(r, hi);
}

}  // namespace

float bf16_to_f32(uint16_t bits) { return widen_to_f32(bits, kBF16); }
uint16_t f32_to_bf16(float x) { return uint16_t(narrow_from_f32(x, kBF16)); }
float f16_to_f32(uint16_t bits) { return widen_to_f32(bits, kF16); }
uint16_t f32_to_f16(float x) { return uint16_t(narrow_from_f32(x, kF16)); }
float e4m3_to_f32(uint8_t bits) { return widen_to_f32(bits, kE4M3); }
uint8_t f32_to_e4m3(float x) { return uint8_t(narrow_from_f32(x, kE4M3)); }
float e5m2_to_f32(uint8_t bits) { return widen_to_f32(bits, kE5M2); }
uint8_t f32_to_e5m2(float x) { return uint8_t(narrow_from_f32(x, kE5M2)); }

double load_as_double(const void* base, DType t, size_t i) {
  switch (t) {
    case DType::f32: return widen_to_double<uint32_t>(base, i, kF32);
    case DType::bf16: return widen_to_double<uint16_t>(base, i, kBF16);
    case DType::f16: return widen_to_double<uint16_t>(base, i, kF16);
    case DType::f8e4m3: return widen_to_double<uint8_t>(base, i, kE4M3);
    case DType::f8e5m2: return widen_to_double<uint8_t>(base, i, kE5M2);
    case DType::i8: return load_element<int8_t>(base, i);
    case DType::i32: return load_element<int32_t>(base, i);
    case DType::u8: return load_element<uint8_t>(base, i);
    case DType::i64: return double(load_element<int64_t>(base, i));
  }
  fail("load_as_double", "invalid DType value ", int(t));
}

void store_from_double(void* base, DType t, size_t i, double v) {
  switch (t) {
    case DType::f32: return narrow_from_double<uint32_t>(base, i, v, kF32);
    case DType::bf16: return narrow_from_double<uint16_t>(base, i, v, kBF16);
    case DType::f16: return narrow_from_double<uint16_t>(base, i, v, kF16);
    case DType::f8e4m3: return narrow_from_double<uint8_t>(base, i, v, kE4M3);
    case DType::f8e5m2: return narrow_from_double<uint8_t>(base, i, v, kE5M2);
    case DType::i8: return store_element(base, i, int8_t(round_saturate(v, INT8_MIN, INT8_MAX)));
    case DType::i32:
      return store_element(base, i, int32_t(round_saturate(v, INT32_MIN, INT32_MAX)));
    case DType::u8: return store_element(base, i, uint8_t(round_saturate(v, 0, UINT8_MAX)));
    case DType::i64: return store_element(base, i, round_saturate(v, INT64_MIN, INT64_MAX));
  }
  fail("store_from_double", "invalid DType value ", int(t));
}

}  // namespace sol
