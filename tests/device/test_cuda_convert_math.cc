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

#include "kernels/convert.h"
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

// Every source code of every narrow -> narrow pair (identity pairs included) against the CPU
// cast itself (kernels::convert_scalar, which the vector paths equal bit for bit): a pair of two
// formats rounds once through f32, a pair of one format copies the bits, NaNs untouched.
template <int kFrom, int kTo>
int narrow_pair_mismatches(DType from, DType to) {
  typedef typename Format<kFrom>::bits In;
  typedef typename Format<kTo>::bits Out;
  const uint32_t codes = sizeof(In) == 1 ? 256 : 65536;
  std::vector<In> in(codes);
  for (uint32_t b = 0; b < codes; ++b) in[b] = In(b);
  std::vector<Out> want(codes);
  kernels::convert_scalar(in.data(), from, want.data(), to, int64_t(codes));
  int wrong = 0;
  for (uint32_t b = 0; b < codes; ++b) {
    const Out got = convert_bits<kFrom, kTo>(in[b]);
    if (got != want[b] && ++wrong <= 3)
      ADD_FAILURE() << dtype_name(from) << " -> " << dtype_name(to) << ": 0x" << std::hex << b << " -> 0x"
                    << uint32_t(got) << ", CPU 0x" << uint32_t(want[b]);
  }
  return wrong;
}

template <int kFrom>
int narrow_from_mismatches(DType from) {
  return narrow_pair_mismatches<kFrom, kBF16>(from, DType::bf16) + narrow_pair_mismatches<kFrom, kF16>(from, DType::f16) +
         narrow_pair_mismatches<kFrom, kE4M3>(from, DType::f8e4m3) +
         narrow_pair_mismatches<kFrom, kE5M2>(from, DType::f8e5m2);
}

TEST(CudaConvertMath, NarrowToNarrowEveryCodeMatchesCpuCast) {
  EXPECT_EQ(narrow_from_mismatches<kBF16>(DType::bf16), 0);
  EXPECT_EQ(narrow_from_mismatches<kF16>(DType::f16), 0);
  EXPECT_EQ(narrow_from_mismatches<kE4M3>(DType::f8e4m3), 0);
  EXPECT_EQ(narrow_from_mismatches<kE5M2>(DType::f8e5m2), 0);
}

// Every code of every narrow format cast to f32 as the cast kernels do it (convert_bits: ToF32,
// with bf16's shortcut), against the CPU cast.
TEST(CudaConvertMath, NarrowToF32EveryCodeMatchesCpuCast) {
  EXPECT_EQ((narrow_pair_mismatches<kBF16, kF32>(DType::bf16, DType::f32)), 0);
  EXPECT_EQ((narrow_pair_mismatches<kF16, kF32>(DType::f16, DType::f32)), 0);
  EXPECT_EQ((narrow_pair_mismatches<kE4M3, kF32>(DType::f8e4m3, DType::f32)), 0);
  EXPECT_EQ((narrow_pair_mismatches<kE5M2, kF32>(DType::f8e5m2, DType::f32)), 0);
}

// A cast to the same format copies: a signalling NaN keeps its quiet bit clear, an e5m2 NaN its
// payload (the NaN rules hold between two different formats only).
TEST(CudaConvertMath, SameFormatCopiesNanBits) {
  EXPECT_EQ((convert_bits<kBF16, kBF16>(u16(0x7f81))), 0x7f81);
  EXPECT_EQ((convert_bits<kF16, kF16>(u16(0xfc65))), 0xfc65);
  EXPECT_EQ((convert_bits<kE5M2, kE5M2>(u8(0x7d))), 0x7d);
  EXPECT_EQ((convert_bits<kF32, kF32>(0x7f800001u)), 0x7f800001u);
  EXPECT_EQ((convert_bits<kBF16, kF16>(u16(0x7f81))), 0x7e08);  // two formats: quietened
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
