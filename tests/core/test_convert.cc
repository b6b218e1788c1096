// Element-type conversions, checked three ways:
//  1. the scalar functions of sol/dtype.h against an independent reference: decoding by the
//     textbook formula (std::ldexp of the fields), encoding by searching the sorted table of
//     every finite value of the format for the nearest one (ties to the even code);
//  2. generic element access (load_as_double / store_from_double);
//  3. every bulk kernel path this CPU runs (scalar, avx2, avx512) against the scalar
//     functions, for all 25 pairs, odd lengths, misaligned pointers, streaming on and off.
#include <gtest/gtest.h>
#include <xmmintrin.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/convert.h"
#include "sol/dtype.h"
#include "sol/error.h"

namespace sol {
namespace {

uint32_t bits_of(float x) { return std::bit_cast<uint32_t>(x); }
float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }

// Collects failures of a long sweep and reports the first few instead of a million lines.
class Mismatches {
 public:
  void check(uint64_t got, uint64_t want, const char* what, uint64_t input) {
    if (got == want) return;
    if (++count_ <= 8) {
      char line[160];
      std::snprintf(line, sizeof line, "  %s(0x%" PRIx64 ") = 0x%" PRIx64 ", want 0x%" PRIx64 "\n",
                    what, input, got, want);
      examples_ += line;
    }
  }
  int count() const { return count_; }
  const std::string& examples() const { return examples_; }

 private:
  int count_ = 0;
  std::string examples_;
};

// ---------------------------------------------------------------------------------------
// Independent reference

struct Format {
  const char* name;
  DType dtype;
  int exponent_bits;
  int mantissa_bits;
  bool has_infinity;  // false: e4m3fn, whose all-ones exponent still holds finite values

  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  uint32_t sign_bit() const { return 1u << (exponent_bits + mantissa_bits); }
  uint32_t code_count() const { return sign_bit() << 1; }
  uint32_t max_exponent() const { return (1u << exponent_bits) - 1; }
  uint32_t max_mantissa() const { return (1u << mantissa_bits) - 1; }
  uint32_t infinity_code() const { return max_exponent() << mantissa_bits; }
};

constexpr Format kBF16{"bf16", DType::bf16, 8, 7, true};
constexpr Format kF16{"f16", DType::f16, 5, 10, true};
constexpr Format kE4M3{"e4m3", DType::f8e4m3, 4, 3, false};
constexpr Format kE5M2{"e5m2", DType::f8e5m2, 5, 2, true};
constexpr Format kFormats[] = {kBF16, kF16, kE4M3, kE5M2};

struct Fields {
  bool negative;
  uint32_t exponent;
  uint32_t mantissa;
};

Fields fields_of(uint32_t code, const Format& f) {
  return {(code & f.sign_bit()) != 0, (code >> f.mantissa_bits) & f.max_exponent(),
          code & f.max_mantissa()};
}

bool reference_is_nan(uint32_t code, const Format& f) {
  const Fields x = fields_of(code, f);
  if (x.exponent != f.max_exponent()) return false;
  return f.has_infinity ? x.mantissa != 0 : x.mantissa == f.max_mantissa();
}

// Value of a code that is not NaN: (-1)^s * 2^(e - bias) * 1.m, or 2^(1 - bias) * 0.m.
double reference_value(uint32_t code, const Format& f) {
  const Fields x = fields_of(code, f);
  double magnitude;
  if (f.has_infinity && x.exponent == f.max_exponent()) {
    magnitude = std::numeric_limits<double>::infinity();
  } else if (x.exponent == 0) {
    magnitude = std::ldexp(double(x.mantissa), 1 - f.bias() - f.mantissa_bits);
  } else {
    const double fraction = std::ldexp(double(x.mantissa), -f.mantissa_bits);
    magnitude = std::ldexp(1.0 + fraction, int(x.exponent) - f.bias());
  }
  return x.negative ? -magnitude : magnitude;
}

// The NaN rules of src/core/convert.cc, restated from its header comment.
uint32_t expected_decoded_nan(uint32_t code, const Format& f) {
  const Fields x = fields_of(code, f);
  return (x.negative ? 0x80000000u : 0u) | 0x7FC00000u | (x.mantissa << (23 - f.mantissa_bits));
}

uint32_t expected_encoded_nan(uint32_t f32_bits, const Format& f) {
  const uint32_t sign = (f32_bits >> 31) ? f.sign_bit() : 0;
  const uint32_t quiet = 1u << (f.mantissa_bits - 1);
  switch (f.dtype) {
    case DType::f8e5m2: return sign | f.infinity_code() | quiet;
    case DType::f8e4m3: return sign | f.infinity_code() | f.max_mantissa();
    default:
      return sign | f.infinity_code() | quiet | ((f32_bits & 0x7FFFFF) >> (23 - f.mantissa_bits));
  }
}

// Round to nearest, ties to even, by searching every finite value of the format.
class NearestEncoder {
 public:
  explicit NearestEncoder(const Format& f) : f_(f) {
    for (uint32_t code = 0; code < f.sign_bit(); ++code) {
      if (reference_is_nan(code, f)) continue;
      const double v = reference_value(code, f);
      if (std::isfinite(v)) values_.push_back({v, code});
    }
    std::sort(values_.begin(), values_.end());
    const Entry& top = values_.back();
    overflow_threshold_ = top.value + (top.value - values_[values_.size() - 2].value) / 2;
  }

  uint32_t encode(float x) const {
    if (std::isnan(x)) return expected_encoded_nan(bits_of(x), f_);
    return (std::signbit(x) ? f_.sign_bit() : 0) | encode_magnitude(std::fabs(double(x)));
  }

  // Consecutive finite non-negative values, for midpoint sweeps.
  std::vector<double> values() const {
    std::vector<double> out;
    for (const Entry& e : values_) out.push_back(e.value);
    return out;
  }

 private:
  struct Entry {
    double value;
    uint32_t code;
    bool operator<(const Entry& o) const { return value < o.value; }
  };

  uint32_t encode_magnitude(double a) const {
    const Entry& top = values_.back();
    if (a > top.value) {
      // IEEE-like formats overflow to inf from the midpoint to the next power of two on (the
      // largest value has an odd mantissa, so the tie goes up); e4m3fn saturates.
      if (f_.has_infinity && a >= overflow_threshold_) return f_.infinity_code();
      return top.code;
    }
    const auto hi = std::lower_bound(values_.begin(), values_.end(), Entry{a, 0});
    if (hi->value == a) return hi->code;
    const auto lo = hi - 1;
    const double twice = 2 * a, sum = lo->value + hi->value;  // both exact
    if (twice < sum) return lo->code;
    if (twice > sum) return hi->code;
    return (lo->code & 1) == 0 ? lo->code : hi->code;
  }

  Format f_;
  std::vector<Entry> values_;
  double overflow_threshold_;
};

// ---------------------------------------------------------------------------------------
// The functions under test, by format

float decode(uint32_t code, const Format& f) {
  switch (f.dtype) {
    case DType::bf16: return bf16_to_f32(uint16_t(code));
    case DType::f16: return f16_to_f32(uint16_t(code));
    case DType::f8e4m3: return e4m3_to_f32(uint8_t(code));
    default: return e5m2_to_f32(uint8_t(code));
  }
}

uint32_t encode(float x, const Format& f) {
  switch (f.dtype) {
    case DType::bf16: return f32_to_bf16(x);
    case DType::f16: return f32_to_f16(x);
    case DType::f8e4m3: return f32_to_e4m3(x);
    default: return f32_to_e5m2(x);
  }
}

void expect_encoder_matches_reference(const Format& f, const std::vector<float>& inputs) {
  const NearestEncoder reference(f);
  Mismatches m;
  for (float x : inputs) m.check(encode(x, f), reference.encode(x), f.name, bits_of(x));
  EXPECT_EQ(m.count(), 0) << f.name << " encoder disagrees with the nearest-value search:\n"
                          << m.examples();
}

// ---------------------------------------------------------------------------------------
// 1. Scalar functions against the reference

TEST(ConvertScalar, DecodesEveryPattern) {
  for (const Format& f : kFormats) {
    Mismatches m;
    for (uint32_t code = 0; code < f.code_count(); ++code) {
      const uint32_t want = reference_is_nan(code, f) ? expected_decoded_nan(code, f)
                                                      : bits_of(float(reference_value(code, f)));
      m.check(bits_of(decode(code, f)), want, f.name, code);
    }
    EXPECT_EQ(m.count(), 0) << f.name << " decode:\n" << m.examples();
  }
}

TEST(ConvertScalar, EveryValueRoundTrips) {
  for (const Format& f : kFormats) {
    Mismatches m;
    std::vector<float> exact;
    for (uint32_t code = 0; code < f.code_count(); ++code) {
      if (reference_is_nan(code, f)) continue;
      exact.push_back(float(reference_value(code, f)));
      m.check(encode(exact.back(), f), code, f.name, code);
    }
    EXPECT_EQ(m.count(), 0) << f.name << " round trip:\n" << m.examples();
    expect_encoder_matches_reference(f, exact);
  }
}

TEST(ConvertScalar, MidpointsTieToEvenAndNeighboursRoundToNearest) {
  for (const Format& f : kFormats) {
    const std::vector<double> values = NearestEncoder(f).values();
    std::vector<float> inputs;
    for (size_t i = 0; i + 1 < values.size(); ++i) {
      const float mid = float((values[i] + values[i + 1]) / 2);  // exact in f32
      for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
        inputs.push_back(x);
        inputs.push_back(-x);
      }
    }
    expect_encoder_matches_reference(f, inputs);
  }
}

TEST(ConvertScalar, SubnormalRangeOfEachTarget) {
  for (const Format& f : kFormats) {
    // Everything up to four times the smallest normal, f32 subnormals included.
    const uint32_t limit = bits_of(std::ldexp(4.0f, 1 - f.bias()));
    std::vector<float> inputs;
    const uint32_t stride = limit / 200000 + 1;
    for (uint32_t bits = 0; bits < limit; bits += stride) {
      for (uint32_t b : {bits, bits + 1, bits + stride / 2}) {
        inputs.push_back(float_of(b));
        inputs.push_back(float_of(b | 0x80000000u));
      }
    }
    expect_encoder_matches_reference(f, inputs);
  }
}

struct Case {
  float input;
  uint32_t want;
};

void expect_cases(const Format& f, std::initializer_list<Case> cases) {
  const NearestEncoder reference(f);
  for (const Case& c : cases) {
    EXPECT_EQ(encode(c.input, f), c.want) << f.name << " of " << c.input;
    EXPECT_EQ(reference.encode(c.input), c.want) << "reference " << f.name << " of " << c.input;
  }
}

float below(float x) { return std::nextafter(x, 0.0f); }

TEST(ConvertScalar, OverflowBoundaries) {
  const float inf = std::numeric_limits<float>::infinity();
  const float f32_max = std::numeric_limits<float>::max();
  expect_cases(kE4M3, {{448, 0x7E}, {below(464), 0x7E}, {464, 0x7E}, {480, 0x7E}, {1e30f, 0x7E},
                       {f32_max, 0x7E}, {inf, 0x7E}, {-448, 0xFE}, {-464, 0xFE}, {-inf, 0xFE},
                       {416, 0x7D}, {432, 0x7E}, {below(432), 0x7D}});
  expect_cases(kE5M2, {{57344, 0x7B}, {below(61440), 0x7B}, {61440, 0x7C}, {65536, 0x7C},
                       {f32_max, 0x7C}, {inf, 0x7C}, {-61440, 0xFC}, {-inf, 0xFC}});
  expect_cases(kF16, {{65504, 0x7BFF}, {below(65520), 0x7BFF}, {65520, 0x7C00}, {f32_max, 0x7C00},
                      {inf, 0x7C00}, {-65520, 0xFC00}, {-inf, 0xFC00}});
  expect_cases(kBF16, {{float_of(0x7F7F0000), 0x7F7F}, {float_of(0x7F7F7FFF), 0x7F7F},
                       {float_of(0x7F7F8000), 0x7F80}, {f32_max, 0x7F80}, {inf, 0x7F80},
                       {-inf, 0xFF80}});
}

TEST(ConvertScalar, SignedZeroAndSmallestValues) {
  const float f32_min_subnormal = float_of(1);
  for (const Format& f : kFormats) {
    const float min_subnormal = std::ldexp(1.0f, 1 - f.bias() - f.mantissa_bits);
    expect_cases(f, {{0.0f, 0}, {-0.0f, f.sign_bit()}, {f32_min_subnormal, 0},
                     {-f32_min_subnormal, f.sign_bit()}, {min_subnormal, 1},
                     {min_subnormal / 2, 0}, {std::nextafter(min_subnormal / 2, 1.0f), 1},
                     {-min_subnormal * 1.5f, f.sign_bit() | 2}});
  }
}

TEST(ConvertScalar, NanRules) {
  struct NanCase {
    uint32_t f32;
    uint32_t bf16, f16, e4m3, e5m2;
  };
  for (const NanCase& c : std::initializer_list<NanCase>{
           {0x7FC00000, 0x7FC0, 0x7E00, 0x7F, 0x7E},   // canonical quiet NaN
           {0x7F800001, 0x7FC0, 0x7E00, 0x7F, 0x7E},   // signalling, payload below the cut
           {0xFFC12345, 0xFFC1, 0xFE09, 0xFF, 0xFE},   // sign and top payload bits kept
           {0x7FBFFFFF, 0x7FFF, 0x7FFF, 0x7F, 0x7E}}) {  // signalling, full payload
    const float x = float_of(c.f32);
    EXPECT_EQ(f32_to_bf16(x), c.bf16) << std::hex << c.f32;
    EXPECT_EQ(f32_to_f16(x), c.f16) << std::hex << c.f32;
    EXPECT_EQ(f32_to_e4m3(x), c.e4m3) << std::hex << c.f32;
    EXPECT_EQ(f32_to_e5m2(x), c.e5m2) << std::hex << c.f32;
  }
  EXPECT_EQ(bits_of(bf16_to_f32(0x7F81)), 0x7FC10000u);  // signalling NaN comes out quiet
  EXPECT_EQ(bits_of(bf16_to_f32(0xFFC1)), 0xFFC10000u);
  EXPECT_EQ(bits_of(f16_to_f32(0x7C01)), 0x7FC02000u);
  EXPECT_EQ(bits_of(e4m3_to_f32(0x7F)), 0x7FF00000u);
  EXPECT_EQ(bits_of(e4m3_to_f32(0xFF)), 0xFFF00000u);
  EXPECT_EQ(bits_of(e5m2_to_f32(0x7D)), 0x7FE00000u);
  EXPECT_EQ(bits_of(e5m2_to_f32(0xFE)), 0xFFC00000u);
  EXPECT_EQ(e4m3_to_f32(0x7E), kE4M3Max);
  EXPECT_EQ(e5m2_to_f32(0x7B), kE5M2Max);
}

TEST(ConvertScalar, RandomBitPatterns) {
  std::mt19937 rng(1);
  std::vector<float> inputs(1 << 20);
  for (const Format& f : kFormats) {
    for (float& x : inputs) x = float_of(uint32_t(rng()));
    expect_encoder_matches_reference(f, inputs);
  }
}

TEST(ConvertScalar, RandomValuesAcrossEachRange) {
  std::mt19937 rng(2);
  std::vector<float> inputs(1 << 19);
  for (const Format& f : kFormats) {
    // Exponents from below the smallest subnormal to above the largest finite value.
    std::uniform_int_distribution<int> exponent(-f.bias() - f.mantissa_bits - 2,
                                                int(f.max_exponent()) - f.bias() + 1);
    for (float& x : inputs) {
      const uint32_t mantissa = uint32_t(rng()) & 0x807FFFFF;  // sign and mantissa
      x = std::ldexp(float_of(0x3F800000 | mantissa), exponent(rng));
    }
    expect_encoder_matches_reference(f, inputs);
  }
}

// ---------------------------------------------------------------------------------------
// 2. Generic element access

TEST(ElementAccess, LoadsEveryNarrowPatternExactly) {
  for (const Format& f : kFormats) {
    Mismatches m;
    for (uint32_t code = 0; code < f.code_count(); ++code) {
      uint8_t storage[4] = {};
      std::memcpy(storage, &code, dtype_size(f.dtype));  // little-endian low bytes
      const double got = load_as_double(storage, f.dtype, 0);
      if (reference_is_nan(code, f)) {
        m.check(std::isnan(got) && std::signbit(got) == bool(code & f.sign_bit()), 1, f.name, code);
      } else {
        m.check(std::bit_cast<uint64_t>(got), std::bit_cast<uint64_t>(reference_value(code, f)),
                f.name, code);
      }
    }
    EXPECT_EQ(m.count(), 0) << f.name << " load_as_double:\n" << m.examples();
  }
}

uint32_t stored_bits(DType t, double v) {
  uint32_t bits = 0;
  store_from_double(&bits, t, 0, v);
  return bits;
}

TEST(ElementAccess, StoresFloatsWithOneRoundingFromDouble) {
  // Just above the bf16 midpoint between 1 and 1 + 2^-7. Rounding to f32 first would land on
  // the midpoint itself and then tie down to 1.0 (0x3F80).
  EXPECT_EQ(stored_bits(DType::bf16, 1.0 + 0x1p-8 + 0x1p-30), 0x3F81u);
  EXPECT_EQ(stored_bits(DType::f16, 1.0 + 0x1p-11 + 0x1p-40), 0x3C01u);
  EXPECT_EQ(stored_bits(DType::f8e4m3, 1.0 + 0x1p-4 + 0x1p-40), 0x39u);
  EXPECT_EQ(stored_bits(DType::f8e5m2, 1.0 + 0x1p-3 + 0x1p-40), 0x3Du);
  EXPECT_EQ(stored_bits(DType::f32, 1.0 + 0x1p-24 + 0x1p-50), 0x3F800001u);
  EXPECT_EQ(stored_bits(DType::f32, 1.0 + 0x1p-24), 0x3F800000u);
  EXPECT_EQ(stored_bits(DType::f32, 1e300), 0x7F800000u);
  EXPECT_EQ(stored_bits(DType::f8e4m3, -1e300), 0xFEu);
  EXPECT_EQ(stored_bits(DType::f32, 1e-300), 0u);
  EXPECT_EQ(stored_bits(DType::f32, -0.0), 0x80000000u);
  EXPECT_EQ(stored_bits(DType::f32, std::numeric_limits<double>::quiet_NaN()), 0x7FC00000u);
  EXPECT_EQ(stored_bits(DType::bf16, -std::numeric_limits<double>::quiet_NaN()), 0xFFC0u);
}

TEST(ElementAccess, StoresIntegersRoundingHalfToEvenAndSaturating) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct IntCase {
    double v;
    int64_t i8, i32;
  };
  for (const IntCase& c : std::initializer_list<IntCase>{
           {2.5, 2, 2}, {3.5, 4, 4}, {-2.5, -2, -2}, {-3.5, -4, -4}, {2.4999, 2, 2},
           {-0.5, 0, 0}, {0.5000001, 1, 1}, {127.4, 127, 127}, {127.5, 127, 128},
           {-128.5, -128, -128}, {-129, -128, -129}, {1e10, 127, INT32_MAX},
           {-1e10, -128, INT32_MIN}, {2147483646.5, 127, 2147483646},
           {2147483647.5, 127, INT32_MAX}, {inf, 127, INT32_MAX}, {-inf, -128, INT32_MIN},
           {nan, 0, 0}}) {
    int8_t i8 = 99;
    int32_t i32 = 99;
    store_from_double(&i8, DType::i8, 0, c.v);
    store_from_double(&i32, DType::i32, 0, c.v);
    EXPECT_EQ(i8, c.i8) << c.v;
    EXPECT_EQ(i32, c.i32) << c.v;
    EXPECT_EQ(load_as_double(&i8, DType::i8, 0), double(c.i8));
    EXPECT_EQ(load_as_double(&i32, DType::i32, 0), double(c.i32));
  }
}

TEST(ElementAccess, IndexesByElement) {
  uint16_t halves[3] = {};
  store_from_double(halves, DType::bf16, 2, -2.0);
  EXPECT_EQ(halves[2], 0xC000);
  EXPECT_EQ(halves[0] | halves[1], 0);
  EXPECT_EQ(load_as_double(halves, DType::bf16, 2), -2.0);
}

// ---------------------------------------------------------------------------------------
// 3. Bulk kernels against the scalar functions

constexpr DType kConvertible[] = {DType::f32, DType::bf16, DType::f16, DType::f8e4m3,
                                  DType::f8e5m2};

uint32_t read_element(const uint8_t* p, DType t, size_t i) {
  uint32_t v = 0;
  std::memcpy(&v, p + i * dtype_size(t), dtype_size(t));
  return v;
}

void write_element(uint8_t* p, DType t, size_t i, uint32_t v) {
  std::memcpy(p + i * dtype_size(t), &v, dtype_size(t));
}

float to_f32(uint32_t bits, DType t) {
  switch (t) {
    case DType::f32: return float_of(bits);
    case DType::bf16: return bf16_to_f32(uint16_t(bits));
    case DType::f16: return f16_to_f32(uint16_t(bits));
    case DType::f8e4m3: return e4m3_to_f32(uint8_t(bits));
    default: return e5m2_to_f32(uint8_t(bits));
  }
}

uint32_t from_f32(float x, DType t) {
  switch (t) {
    case DType::f32: return bits_of(x);
    case DType::bf16: return f32_to_bf16(x);
    case DType::f16: return f32_to_f16(x);
    case DType::f8e4m3: return f32_to_e4m3(x);
    default: return f32_to_e5m2(x);
  }
}

// Inputs of type t: special values first (so short lengths see them too), then a mix that
// reaches every rounding case of every target.
std::vector<uint8_t> make_source(DType t, size_t count) {
  std::mt19937 rng(uint32_t(t) + 7);
  std::vector<uint32_t> values;
  if (t == DType::f32) {
    values = {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
              0x7F800001, 0xFF800001, 0x7FA00000, 0x7FBFFFFF, 0xFFFFFFFF, 0x00000001,
              0x80000001, 0x00400000, 0x007FFFFF, 0x807FFFFF, 0x00800000, 0x7F7FFFFF,
              0xFF7FFFFF, 0x7F7F8000, 0x7F7F7FFF};
    for (float x : {448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 65504.0f, 65520.0f, 0x1p-9f,
                    0x1p-10f, 0x1p-16f, 0x1p-17f, 0x1p-24f, 0x1p-25f, 0x1.8p-10f, 0x1.8p-17f}) {
      for (float y : {x, below(x), std::nextafter(x, INFINITY)}) {
        values.push_back(bits_of(y));
        values.push_back(bits_of(-y));
      }
    }
    while (values.size() < count) {
      const Format& f = kFormats[rng() % 4];
      const uint32_t code = rng() % f.code_count();
      const uint32_t next = (code + 1) % f.code_count();
      const bool plain = reference_is_nan(code, f) || reference_is_nan(next, f);
      switch (rng() % 4) {
        case 0: values.push_back(uint32_t(rng())); break;
        case 1: values.push_back(bits_of(decode(code, f))); break;
        case 2: {  // a midpoint between neighbours (or one f32 step beside it)
          if (plain || (code & f.sign_bit()) != (next & f.sign_bit())) break;
          const double a = reference_value(code, f), b = reference_value(next, f);
          if (!std::isfinite(a) || !std::isfinite(b)) break;
          values.push_back(bits_of(float((a + b) / 2)) + uint32_t(rng() % 3) - 1);
          break;
        }
        default:
          values.push_back(bits_of(std::ldexp(float_of(0x3F800000 | (rng() & 0x807FFFFF)),
                                              int(rng() % 60) - 40)));
      }
    }
  } else if (dtype_size(t) == 2) {
    values = {0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x007F, 0x0080, 0x7F80, 0xFF80,
              0x7C00, 0xFC00, 0x7C01, 0xFC01, 0x7D00, 0x7F81, 0xFF81, 0x7E00, 0x7FC0,
              0x7FFF, 0xFFFF, 0x7BFF, 0x7F7F, 0xFBFF, 0x3C00, 0x3F80};
    // Every pattern, scattered (40503 is odd, so this is a permutation of 0..65535).
    for (uint32_t i = 0; values.size() < count; ++i) {
      values.push_back((i * 40503u + 12345u) & 0xFFFF);
    }
  } else {
    for (uint32_t i = 0; values.size() < count; ++i) values.push_back((i * 167u + 13u) & 0xFF);
  }
  std::vector<uint8_t> out(count * dtype_size(t));
  for (size_t i = 0; i < count; ++i) write_element(out.data(), t, i, values[i]);
  return out;
}

std::vector<uint8_t> expected_output(const std::vector<uint8_t>& src, DType from, DType to) {
  const size_t count = src.size() / dtype_size(from);
  std::vector<uint8_t> out(count * dtype_size(to));
  for (size_t i = 0; i < count; ++i) {
    const uint32_t in = read_element(src.data(), from, i);
    write_element(out.data(), to, i, from == to ? in : from_f32(to_f32(in, from), to));
  }
  return out;
}

using ConvertFn = void (*)(const void*, DType, void*, DType, int64_t, bool, int64_t);

struct KernelPath {
  const char* name;
  ConvertFn convert;
  bool (*cpu_runs)();
};

bool cpu_has_avx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
}

bool cpu_has_avx512() {
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bf16");
}

void PrintTo(const KernelPath& path, std::ostream* os) { *os << path.name; }

const KernelPath kPaths[] = {
    {"scalar",
     [](const void* s, DType from, void* d, DType to, int64_t n, bool, int64_t) {
       kernels::convert_scalar(s, from, d, to, n);
     },
     [] { return true; }},
    {"avx2", kernels::convert_avx2, cpu_has_avx2},
    {"avx512",
     [](const void* s, DType from, void* d, DType to, int64_t n, bool nontemporal, int64_t ahead) {
       kernels::convert_avx512(s, from, d, to, n, nontemporal, ahead, 4 * ahead);  // and into L2
     },
     cpu_has_avx512},
};

constexpr size_t kMaxLength = 100003;
constexpr size_t kGuardBytes = 192;
constexpr uint8_t kPoison = 0x5A;

uint8_t* align64(std::vector<uint8_t>& storage) {
  const auto address = reinterpret_cast<uintptr_t>(storage.data());
  return storage.data() + (64 - address % 64) % 64;
}

struct Layout {
  size_t src_offset_bytes;
  size_t dst_offset_bytes;
};

// Runs one conversion into a poisoned buffer and checks the result and every byte around it.
// Returns false (after reporting) on the first wrong byte.
bool run_and_check(const KernelPath& path, DType from, DType to, const std::vector<uint8_t>& src,
                   const std::vector<uint8_t>& want, size_t n, Layout layout, bool nontemporal) {
  const size_t in_bytes = n * dtype_size(from), out_bytes = n * dtype_size(to);
  std::vector<uint8_t> src_storage(in_bytes + layout.src_offset_bytes + 64);
  uint8_t* s = align64(src_storage) + layout.src_offset_bytes;
  std::memcpy(s, src.data(), in_bytes);

  const size_t region = kGuardBytes + layout.dst_offset_bytes + out_bytes + kGuardBytes;
  std::vector<uint8_t> dst_storage(region + 64);
  uint8_t* guarded = align64(dst_storage);
  std::memset(guarded, kPoison, region);
  uint8_t* d = guarded + kGuardBytes + layout.dst_offset_bytes;

  path.convert(s, from, d, to, int64_t(n), nontemporal, 8192);

  const std::string where = std::string(path.name) + " " + std::string(dtype_name(from)) + "->" +
                            std::string(dtype_name(to)) + " n=" + std::to_string(n) +
                            " src+" + std::to_string(layout.src_offset_bytes) + "B dst+" +
                            std::to_string(layout.dst_offset_bytes) +
                            "B nontemporal=" + std::to_string(nontemporal);
  const size_t elem = dtype_size(to);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t got = read_element(d, to, i), expect = read_element(want.data(), to, i);
    if (got != expect) {
      ADD_FAILURE() << where << ": element " << i << " of input 0x" << std::hex
                    << read_element(s, from, i) << " is 0x" << got << ", want 0x" << expect;
      return false;
    }
  }
  for (size_t b = 0; b < region; ++b) {
    const bool inside = guarded + b >= d && guarded + b < d + n * elem;
    if (!inside && guarded[b] != kPoison) {
      ADD_FAILURE() << where << ": wrote outside dst, at byte " << int64_t(guarded + b - d);
      return false;
    }
  }
  return true;
}

class ConvertKernel : public testing::TestWithParam<KernelPath> {
 protected:
  void SetUp() override {
    if (!GetParam().cpu_runs()) {
      GTEST_SKIP() << "this CPU lacks the ISA of the " << GetParam().name << " path";
    }
  }
};

TEST_P(ConvertKernel, MatchesScalarFunctionsForEveryPairLengthAndAlignment) {
  const size_t lengths[] = {0, 1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 1000, kMaxLength};
  for (DType from : kConvertible) {
    const std::vector<uint8_t> src = make_source(from, kMaxLength);
    for (DType to : kConvertible) {
      const std::vector<uint8_t> want = expected_output(src, from, to);
      const size_t in = dtype_size(from), out = dtype_size(to);
      const Layout layouts[] = {{0, 0}, {in, 3 * out}, {3 * in, out}, {2 * in, 2 * out}, {1, 1}};
      for (size_t n : lengths) {
        for (const Layout& layout : layouts) {
          for (bool nontemporal : {false, true}) {
            if (!run_and_check(GetParam(), from, to, src, want, n, layout, nontemporal)) return;
          }
        }
      }
    }
  }
}

// Callers may run with flush-to-zero, denormals-are-zero or another rounding mode set.
TEST_P(ConvertKernel, ResultsDoNotDependOnMxcsr) {
  struct MxcsrOverride {
    unsigned saved = _mm_getcsr();
    MxcsrOverride() { _mm_setcsr(saved | 0x8000 | 0x0040 | 0x6000); }  // FTZ, DAZ, toward zero
    ~MxcsrOverride() { _mm_setcsr(saved); }
  };
  for (DType from : kConvertible) {
    const std::vector<uint8_t> src = make_source(from, kMaxLength);
    for (DType to : kConvertible) {
      const std::vector<uint8_t> want = expected_output(src, from, to);
      const MxcsrOverride mxcsr;
      for (bool nontemporal : {false, true}) {
        if (!run_and_check(GetParam(), from, to, src, want, kMaxLength,
                           {dtype_size(from), dtype_size(to)}, nontemporal)) {
          return;
        }
      }
    }
  }
}

// The vector encoders round with their own integer code, so beyond the mixed sources above
// they meet the scalar functions on a few million f32: random bit patterns, values spread over
// each format's range, and every midpoint between neighbours with its f32 neighbours.
TEST_P(ConvertKernel, EncodesMillionsOfF32LikeTheScalarFunctions) {
  std::mt19937 rng(3);
  std::vector<float> inputs;
  for (int i = 0; i < (1 << 20); ++i) inputs.push_back(float_of(uint32_t(rng())));
  for (int i = 0; i < (1 << 20); ++i) {
    const float unit = float_of(0x3F800000 | (uint32_t(rng()) & 0x807FFFFF));
    inputs.push_back(std::ldexp(unit, int(rng() % 80) - 50));
  }
  for (const Format& f : kFormats) {
    const std::vector<double> values = NearestEncoder(f).values();
    for (size_t i = 0; i + 1 < values.size(); i += (f.dtype == DType::bf16 ? 7 : 1)) {
      const float mid = float((values[i] + values[i + 1]) / 2);
      for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
        inputs.push_back(x);
        inputs.push_back(-x);
      }
    }
  }
  std::vector<uint8_t> src(inputs.size() * 4);
  std::memcpy(src.data(), inputs.data(), src.size());
  for (DType to : {DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2}) {
    const std::vector<uint8_t> want = expected_output(src, DType::f32, to);
    for (bool nontemporal : {false, true}) {
      if (!run_and_check(GetParam(), DType::f32, to, src, want, inputs.size(), {0, 0},
                         nontemporal)) {
        return;
      }
    }
  }
}

TEST_P(ConvertKernel, RejectsIntegerTypes) {
  int8_t src[4] = {}, dst[4] = {};
  EXPECT_THROW(GetParam().convert(src, DType::i8, dst, DType::f32, 4, false, 0), Error);
  EXPECT_THROW(GetParam().convert(src, DType::f32, dst, DType::i32, 1, false, 0), Error);
}

INSTANTIATE_TEST_SUITE_P(Paths, ConvertKernel, testing::ValuesIn(kPaths),
                         [](const testing::TestParamInfo<KernelPath>& info) {
                           return std::string(info.param.name);
                         });

TEST(ConvertKernel, SupportsExactlyTheFloatPairs) {
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      const bool want = is_float(from) && is_float(to);
      EXPECT_EQ(kernels::convert_supported(from, to), want)
          << dtype_name(from) << " -> " << dtype_name(to);
    }
  }
}

}  // namespace
}  // namespace sol
