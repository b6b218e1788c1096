// The device conversion math (src/kernels/cuda/convert_math.cuh, compiled here as plain C++)
// against the specification in src/core/convert.cc: every code of every narrow format widened,
// every code cast to every other format, and f32 values densely sampled across all binades,
// subnormals, halfway cases, overflow edges, infinities and NaN payloads.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cuda/convert_math.cuh"
#include "sol/dtype.h"

namespace sol {
namespace {

using namespace sol_cuda;

std::vector<uint32_t> f32_samples() {
  std::vector<uint32_t> v;
  for (uint64_t x = 0; x <= 0xffffffffull; x += 4093) v.push_back(uint32_t(x));  // every binade
  for (uint32_t exponent = 0; exponent < 256; ++exponent)
    for (uint32_t low = 0; low < 64; ++low)
      for (uint32_t sign : {0u, 1u}) {
        const uint32_t base = (sign << 31) | (exponent << 23);
        // Around every rounding boundary of bf16 (16 bits dropped), f16 (13) and fp8 (20, 21).
        for (int shift : {13, 16, 20, 21}) {
          const uint32_t half = 1u << (shift - 1);
          for (uint32_t m : {low << shift, (low << shift) | half, (low << shift) | (half - 1), (low << shift) | (half + 1)})
            v.push_back(base | (m & 0x7fffffu));
        }
      }
  return v;
}

template <int kCode>
uint32_t spec_narrow(float x);
template <> uint32_t spec_narrow<kBF16>(float x) { return f32_to_bf16(x); }
template <> uint32_t spec_narrow<kF16>(float x) { return f32_to_f16(x); }
template <> uint32_t spec_narrow<kE4M3>(float x) { return f32_to_e4m3(x); }
template <> uint32_t spec_narrow<kE5M2>(float x) { return f32_to_e5m2(x); }

template <int kCode>
float spec_widen(uint32_t b);
template <> float spec_widen<kBF16>(uint32_t b) { return bf16_to_f32(uint16_t(b)); }
template <> float spec_widen<kF16>(uint32_t b) { return f16_to_f32(uint16_t(b)); }
template <> float spec_widen<kE4M3>(uint32_t b) { return e4m3_to_f32(uint8_t(b)); }
template <> float spec_widen<kE5M2>(uint32_t b) { return e5m2_to_f32(uint8_t(b)); }

template <int kCode>
void expect_narrowing_matches(const std::vector<uint32_t>& samples, const char* name) {
  int wrong = 0;
  for (uint32_t x : samples) {
    const uint32_t want = spec_narrow<kCode>(std::bit_cast<float>(x));
    const uint32_t got = narrow_from_f32<kCode>(x);
    if (want != got && ++wrong <= 5) ADD_FAILURE() << name << ": f32 0x" << std::hex << x << " -> 0x" << got << ", spec 0x" << want;
  }
  EXPECT_EQ(wrong, 0) << name;
}

template <int kCode>
void expect_widening_matches(const char* name) {
  const uint32_t codes = sizeof(typename Format<kCode>::bits) == 1 ? 256 : 65536;
  int wrong = 0;
  for (uint32_t b = 0; b < codes; ++b) {
    const uint32_t want = std::bit_cast<uint32_t>(spec_widen<kCode>(b));
    const uint32_t got = widen_to_f32<kCode>(typename Format<kCode>::bits(b));
    if (want != got && ++wrong <= 5) ADD_FAILURE() << name << ": 0x" << std::hex << b << " -> 0x" << got << ", spec 0x" << want;
  }
  EXPECT_EQ(wrong, 0) << name;
}

TEST(CudaConvertMath, NarrowingFromF32MatchesSpec) {
  const std::vector<uint32_t> s = f32_samples();
  expect_narrowing_matches<kBF16>(s, "bf16");
  expect_narrowing_matches<kF16>(s, "f16");
  expect_narrowing_matches<kE4M3>(s, "e4m3");
  expect_narrowing_matches<kE5M2>(s, "e5m2");
}

TEST(CudaConvertMath, WideningEveryCodeMatchesSpec) {
  expect_widening_matches<kBF16>("bf16");
  expect_widening_matches<kF16>("f16");
  expect_widening_matches<kE4M3>("e4m3");
  expect_widening_matches<kE5M2>("e5m2");
}

// Narrow -> narrow through f32 equals the CPU cast (whose scalar path is the same
// composition of the spec's conversions) for every source code.
TEST(CudaConvertMath, NarrowToNarrowEveryCode) {
  int wrong = 0;
  for (uint32_t b = 0; b < 65536; ++b) {
    const float via_bf16 = bf16_to_f32(uint16_t(b));
    if (convert_bits<kBF16, kE4M3>(u16(b)) != f32_to_e4m3(via_bf16)) ++wrong;
    if (convert_bits<kBF16, kE5M2>(u16(b)) != f32_to_e5m2(via_bf16)) ++wrong;
    if (convert_bits<kF16, kBF16>(u16(b)) != f32_to_bf16(f16_to_f32(uint16_t(b)))) ++wrong;
    if (convert_bits<kBF16, kBF16>(u16(b)) != f32_to_bf16(via_bf16)) ++wrong;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    if (convert_bits<kE4M3, kE5M2>(u8(b)) != f32_to_e5m2(e4m3_to_f32(uint8_t(b)))) ++wrong;
    if (convert_bits<kE5M2, kE4M3>(u8(b)) != f32_to_e4m3(e5m2_to_f32(uint8_t(b)))) ++wrong;
    if (convert_bits<kE4M3, kBF16>(u8(b)) != f32_to_bf16(e4m3_to_f32(uint8_t(b)))) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
}

TEST(CudaConvertMath, SaturationAndNanRules) {
  const auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
  EXPECT_EQ(narrow_from_f32<kE4M3>(bits(1e6f)), 0x7e);   // saturates to 448
  EXPECT_EQ(narrow_from_f32<kE4M3>(bits(-INFINITY)), 0xfe);
  EXPECT_EQ(narrow_from_f32<kE4M3>(bits(NAN)), 0x7f);
  EXPECT_EQ(narrow_from_f32<kE5M2>(bits(1e6f)), 0x7c);   // to inf
  EXPECT_EQ(narrow_from_f32<kE5M2>(0xffc00001u), 0xfe);
  EXPECT_EQ(narrow_from_f32<kBF16>(0x7f800001u), 0x7fc0); // signalling NaN quietened
  EXPECT_EQ(narrow_from_f32<kBF16>(bits(-0.0f)), 0x8000);
}

}  // namespace
}  // namespace sol
