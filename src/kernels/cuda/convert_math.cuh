#pragma once
// Bit-exact conversions between f32 and the narrow float formats, written once for device code
// and for the host (tests/device/test_cuda_convert_math.cc compares it with src/core/convert.cc,
// the specification, over every bf16/f16/fp8 code and millions of f32 values). Integer
// arithmetic only, so neither FTZ nor the rounding mode can change a result.
//   f32 -> narrow: round to nearest, ties to even; subnormals exact; bf16/f16/e5m2 overflow to
//   inf at the midpoint above the largest finite value, e4m3 saturates to 448 (inf too).
//   NaN: bf16/f16 keep the top payload bits with the quiet bit set, e5m2 -> sign|0x7E,
//   e4m3 -> sign|0x7F. narrow -> f32 is exact (NaN payloads left-aligned, quiet bit set).
// A narrow -> narrow cast goes through f32: the widening is exact, so it rounds once (bf16 <->
// e4m3 compute the same bits directly).
// A cast to the same format copies the bits, as the CPU path does (kernels::convert_scalar): the
// NaN rules above hold between two different formats only, so a signalling NaN or a non-canonical
// e5m2 NaN passes through unchanged.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SOL_HD __host__ __device__ __forceinline__
#else
#define SOL_HD inline
#endif

namespace sol_cuda {

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned char u8;

// Element types, numbered as sol::DType.
enum DTypeCode { kF32 = 0, kBF16 = 1, kF16 = 2, kE4M3 = 3, kE5M2 = 4 };

template <int kCode> struct Format;
template <> struct Format<kBF16> { typedef u16 bits; enum { e = 8, m = 7, has_inf = 1, nan_rule = 0 }; };
template <> struct Format<kF16> { typedef u16 bits; enum { e = 5, m = 10, has_inf = 1, nan_rule = 0 }; };
template <> struct Format<kE4M3> { typedef u8 bits; enum { e = 4, m = 3, has_inf = 0, nan_rule = 2 }; };
template <> struct Format<kE5M2> { typedef u8 bits; enum { e = 5, m = 2, has_inf = 1, nan_rule = 1 }; };
template <> struct Format<kF32> { typedef u32 bits; };

// v / 2^shift rounded to nearest even, 1 <= shift <= 24, v < 2^24.
SOL_HD u32 shift_right_round_even(u32 v, int shift) {
  const u32 kept = v >> shift;
  const u32 rest = v & ((1u << shift) - 1u);
  const u32 half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
}

template <int kCode>
SOL_HD typename Format<kCode>::bits narrow_from_f32(u32 x) {
  typedef Format<kCode> F;
  const int e = F::e, m = F::m, bias = (1 << (e - 1)) - 1;
  const u32 sign = (x >> 31) << (e + m);
  const u32 abs = x & 0x7fffffffu;
  const u32 exponent_mask = (1u << e) - 1u, mantissa_mask = (1u << m) - 1u;
  const u32 inf_code = exponent_mask << m;
  const u32 max_finite = F::has_inf ? inf_code - 1u : (inf_code | (mantissa_mask - 1u));
  if (abs > 0x7f800000u) {  // NaN
    u32 nan = 0;
    if (F::nan_rule == 0) nan = inf_code | (1u << (m - 1)) | ((abs & 0x7fffffu) >> (23 - m));
    else if (F::nan_rule == 1) nan = inf_code | (1u << (m - 1));
    else nan = inf_code | mantissa_mask;
    return typename F::bits(sign | nan);
  }
  if (abs == 0x7f800000u) return typename F::bits(sign | (F::has_inf ? inf_code : max_finite));
  const u32 field = abs >> 23;
  if (abs == 0) return typename F::bits(sign);
  // f32 subnormals are spaced like the smallest normal binade (exponent -126, no implicit bit).
  const u32 significand = field ? (abs & 0x7fffffu) | 0x800000u : abs;
  const int exponent = field ? int(field) - 127 : -126;
  const int min_exponent = 1 - bias;
  const int binade = exponent > min_exponent ? exponent : min_exponent;
  const int shift = binade - exponent + 23 - m;  // bits of the 24-bit significand dropped
  const u32 steps = shift > 24 ? 0u : shift_right_round_even(significand, shift);
  // steps holds the implicit bit for normals: adding (biased binade - 1) << m gives the code,
  // and a carry into the next binade (or into inf) falls out of the same addition.
  u32 code = (u32(binade + bias - 1) << m) + steps;
  const u32 limit = F::has_inf ? inf_code : max_finite;
  if (code > limit) code = limit;
  return typename F::bits(sign | code);
}

template <int kCode>
SOL_HD u32 widen_to_f32(typename Format<kCode>::bits bits) {
  typedef Format<kCode> F;
  const int e = F::e, m = F::m, bias = (1 << (e - 1)) - 1;
  const u32 b = bits;
  const u32 sign = (b >> (e + m)) << 31;
  const u32 field = (b >> m) & ((1u << e) - 1u);
  const u32 mantissa = b & ((1u << m) - 1u);
  const bool special = field == (1u << e) - 1u && (F::has_inf || mantissa == (1u << m) - 1u);
  if (special) {
    if (F::has_inf && mantissa == 0) return sign | 0x7f800000u;
    return sign | 0x7fc00000u | (mantissa << (23 - m));
  }
  if (field != 0) return sign | (u32(int(field) - bias + 127) << 23) | (mantissa << (23 - m));
  if (mantissa == 0) return sign;
  // Subnormal: mantissa * 2^(1 - bias - m). bf16 shares f32's exponent range, so its
  // subnormals are f32 subnormals; the others' are f32 normals, renormalised at the leading bit.
  // (& 31: the shift is only taken for bf16, where it is 16; it keeps the others' dead branch defined.)
  const int to_f32_subnormal = 1 - bias - m + 149;
  if (to_f32_subnormal < 23) return sign | (mantissa << (to_f32_subnormal & 31));
  int p = m - 1;
  while (!(mantissa >> p)) --p;
  const u32 fraction = (mantissa << (m - p)) & ((1u << m) - 1u);
  return sign | (u32(p + 1 - bias - m + 127) << 23) | (fraction << (23 - m));
}

template <int kCode> struct ToF32 {
  static SOL_HD u32 apply(typename Format<kCode>::bits b) { return widen_to_f32<kCode>(b); }
};
template <> struct ToF32<kF32> {
  static SOL_HD u32 apply(u32 b) { return b; }
};
// bf16 is f32's top half (its subnormals are f32's), so widening is a shift; only a NaN changes,
// to quiet. The same bits as widen_to_f32<kBF16> for every code, in a few instructions.
template <> struct ToF32<kBF16> {
  static SOL_HD u32 apply(u16 b) {
    const u32 x = u32(b) << 16;
    return (x & 0x7fffffffu) > 0x7f800000u ? x | 0x00400000u : x;
  }
};
template <int kCode> struct FromF32 {
  static SOL_HD typename Format<kCode>::bits apply(u32 x) { return narrow_from_f32<kCode>(x); }
};
template <> struct FromF32<kF32> {
  static SOL_HD u32 apply(u32 x) { return x; }
};

template <int kFrom, int kTo> struct Convert {
  static SOL_HD typename Format<kTo>::bits apply(typename Format<kFrom>::bits b) {
    return FromF32<kTo>::apply(ToF32<kFrom>::apply(b));
  }
};
template <int kCode> struct Convert<kCode, kCode> {
  static SOL_HD typename Format<kCode>::bits apply(typename Format<kCode>::bits b) { return b; }
};

// bf16 <-> e4m3, the fp8 casts of a model's activations, directly on the codes: the same bits as
// the round trip through f32 above (every code checked on the host), in a few integer operations
// where the general path spends ~70-80 per element and leaves the cast issue-bound on the device.
template <> struct Convert<kBF16, kE4M3> {
  static SOL_HD u8 apply(u16 b) {
    const u32 sign = (u32(b) >> 8) & 0x80u, abs = b & 0x7fffu;
    if (abs >= 0x7f80u) return u8(sign | (abs == 0x7f80u ? 0x7eu : 0x7fu));  // inf saturates, NaN
    const u32 field = abs >> 7;
    u32 code;
    if (field >= 121u) {  // an e4m3 normal (2^-6 and up): drop 4 mantissa bits, ties to even
      const u32 t = abs - (120u << 7);
      code = (t + 7u + ((t >> 4) & 1u)) >> 4;
      code = code > 0x7eu ? 0x7eu : code;  // past 448 saturates
    } else {  // an e4m3 subnormal, in steps of 2^-9: the 8-bit significand shifted down
      const int shift = 125 - int(field);
      code = shift > 24 ? 0u : shift_right_round_even((abs & 0x7fu) | 0x80u, shift);
    }
    return u8(sign | code);
  }
};
template <> struct Convert<kE4M3, kBF16> {
  static SOL_HD u16 apply(u8 b) {
    const u32 sign = (u32(b) & 0x80u) << 8, abs = b & 0x7fu;
    if (abs == 0x7fu) return u16(sign | 0x7ff0u);                      // NaN, payload kept as f32 does
    if (abs >= 0x08u) return u16(sign | ((abs + (120u << 3)) << 4));  // normal: rebias, widen
    if (abs == 0u) return u16(sign);
    // Subnormal m * 2^-9: normalise at the leading bit p of m (0..2).
    const u32 p = abs >= 4u ? 2u : (abs >= 2u ? 1u : 0u);
    return u16(sign | ((118u + p) << 7) | (((abs << (3u - p)) & 7u) << 4));
  }
};

// One element of a cast From -> To, on raw bits.
template <int kFrom, int kTo>
SOL_HD typename Format<kTo>::bits convert_bits(typename Format<kFrom>::bits b) {
  return Convert<kFrom, kTo>::apply(b);
}

}  // namespace sol_cuda
