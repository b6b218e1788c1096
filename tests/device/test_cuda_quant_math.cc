// The device kernels' FP8 and RMSNorm arithmetic (src/kernels/cuda/fp8_quant_math.cuh,
// rms_math.cuh, compiled here as plain C++) against the CPU path, bit for bit: random rows over
// many binades, groups with NaN and +-inf, subnormal results, halfway cases, every row length
// class of the 64-way partial sums. What the host cannot run is the device's cvt instruction
// (its host stand-in is the integer spec, src/kernels/cuda/convert_math.cuh); the gpu tests
// compare the kernels themselves.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cuda/fp8_quant_math.cuh"
#include "kernels/cuda/rms_math.cuh"
#include "kernels/norm.h"
#include "sol/dtype.h"
#include "sol/hw.h"
#include "sol/norm.h"
#include "sol/quant.h"

namespace sol {
namespace {

using namespace sol_cuda;

// Values over 2^-40 .. 2^20 with random signs, exact zeros, and specials by position.
std::vector<float> random_row(int64_t n, uint64_t seed, bool specials) {
  std::mt19937_64 rng{seed};
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    const uint64_t r = rng();
    x = (r & 15) == 0 ? 0.0f : std::ldexp(float(int(r >> 8 & 0xffff) - 0x8000) / 0x8000, int(r >> 40 & 63) - 40);
  }
  if (specials && n > 300) {
    v[3] = NAN;             // group 0: NaN
    v[130] = INFINITY;      // group 1: +inf
    v[131] = -INFINITY;
    v[260] = -1e-30f;       // group 2: tiny only (the 1e-4 floor)
    for (int i = 256; i < 384 && i < n; ++i) v[size_t(i)] = i == 260 ? v[size_t(i)] : 0.0f;
  }
  return v;
}

// The device per-token rule on one row (as quant16 applies it, with the host's max order).
void device_quant_row(const std::vector<float>& x, int64_t group, bool ue8m0, std::vector<uint8_t>& q,
                      std::vector<float>& s) {
  const int64_t n = int64_t(x.size());
  q.assign(size_t(n), 0);
  s.assign(size_t(n / group), 0.0f);
  for (int64_t g = 0; g < n / group; ++g) {
    u32 amax = 0;
    for (int64_t i = g * group; i < (g + 1) * group; ++i) amax = max_u32(amax, abs_bits(x[size_t(i)]));
    const Fp8Scale sc = fp8_scale_of(amax, ue8m0);
    s[size_t(g)] = sc.scale;
    for (int64_t i = g * group; i < (g + 1) * group; i += 2) {
      const u32 c = fp8_codes2(x[size_t(i)], x[size_t(i + 1)], sc);
      q[size_t(i)] = uint8_t(c), q[size_t(i + 1)] = uint8_t(c >> 8);
    }
  }
}

TEST(CudaQuantMath, PerTokenRuleMatchesCpuBitForBit) {
  for (bool ue8m0 : {false, true})
    for (int64_t group : {16, 64, 128})
      for (uint64_t seed = 1; seed <= 40; ++seed) {
        const int64_t n = 7 * 128;
        std::vector<float> x = random_row(n, seed, seed % 2 == 0);
        std::vector<uint8_t> want(static_cast<size_t>(n));
        std::vector<float> want_s(static_cast<size_t>(n / group));
        quant_fp8_per_token(Tensor(x.data(), DType::f32, {1, n}), Tensor(want.data(), DType::f8e4m3, {1, n}),
                            Tensor(want_s.data(), DType::f32, {1, n / group}),
                            {group, ue8m0 ? ScaleFormat::ue8m0 : ScaleFormat::f32});
        std::vector<uint8_t> got;
        std::vector<float> got_s;
        device_quant_row(x, group, ue8m0, got, got_s);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(got[size_t(i)], want[size_t(i)]) << "seed " << seed << " group " << group << " ue8m0 " << ue8m0
                                                     << " element " << i << " x = " << x[size_t(i)];
        for (int64_t g = 0; g < n / group; ++g)
          ASSERT_EQ(bits_of(got_s[size_t(g)]), bits_of(want_s[size_t(g)])) << "seed " << seed << " group " << g;
      }
}

// Every rounding boundary of e4m3 under both scale formats: the group's amax fixed at 448 * 2^k
// (scale exactly 2^k for UE8M0), the other elements walking the midpoints between codes.
TEST(CudaQuantMath, HalfwayCasesAndSubnormalCodesMatchCpu) {
  for (bool ue8m0 : {false, true})
    for (int k : {-12, -3, 0, 5}) {
      std::vector<float> x(256);
      for (int i = 0; i < 256; ++i) {
        const float code_value = e4m3_to_f32(uint8_t(i % 127));
        const float next = e4m3_to_f32(uint8_t(i % 127 + 1));
        x[size_t(i)] = std::ldexp((code_value + next) / 2, k) * (i % 2 ? -1.0f : 1.0f);
      }
      x[0] = std::ldexp(448.0f, k);
      std::vector<uint8_t> want(256), got;
      std::vector<float> want_s(2), got_s;
      quant_fp8_per_token(Tensor(x.data(), DType::f32, {1, 256}), Tensor(want.data(), DType::f8e4m3, {1, 256}),
                          Tensor(want_s.data(), DType::f32, {1, 2}), {128, ue8m0 ? ScaleFormat::ue8m0 : ScaleFormat::f32});
      device_quant_row(x, 128, ue8m0, got, got_s);
      EXPECT_EQ(got, want) << "k " << k << " ue8m0 " << ue8m0;
      EXPECT_EQ(std::memcmp(got_s.data(), want_s.data(), 8), 0);
    }
}

// rms_partial / rms_combine / rms_inverse / rms_apply over a row against sol::rmsnorm on the CPU.
template <class T>
void expect_rms_row_matches(const std::vector<T>& x, DType t, const std::vector<float>& w) {
  const int64_t h = int64_t(x.size());
  std::vector<T> y(static_cast<size_t>(h));
  rmsnorm(Tensor(const_cast<T*>(x.data()), t, {1, h}), Tensor(const_cast<float*>(w.data()), DType::f32, {h}),
          Tensor(y.data(), t, {1, h}), {1e-6f});
  auto element = [&](long long i) {
    return t == DType::bf16 ? bf16_to_float(u16(reinterpret_cast<const uint16_t*>(x.data())[i]))
                            : reinterpret_cast<const float*>(x.data())[i];
  };
  float partials[64];
  for (int k = 0; k < 64; ++k) partials[k] = rms_partial(k, t == DType::bf16, h, element);
  const float inv = rms_inverse(rms_combine(partials), h, 1e-6f);
  for (int64_t i = 0; i < h; ++i) {
    const float v = rms_apply(element(i), inv, w[size_t(i)]);
    const u32 got = t == DType::bf16 ? u32(narrow_from_f32<kBF16>(bits_of(v))) : bits_of(v);
    u32 want;
    if (t == DType::bf16) want = reinterpret_cast<const uint16_t*>(y.data())[i];
    else std::memcpy(&want, &y[size_t(i)], 4);
    ASSERT_EQ(got, want) << dtype_name(t) << " h " << h << " element " << i;
  }
}

TEST(CudaRmsMath, StatisticsAndOutputsMatchCpuBitForBit) {
  for (int64_t h : {1, 7, 63, 64, 65, 127, 1031, 4096, 7168}) {
    std::mt19937_64 rng{uint64_t(h)};
    std::vector<float> xf(static_cast<size_t>(h)), w(static_cast<size_t>(h));
    std::vector<uint16_t> xb(static_cast<size_t>(h));
    for (int64_t i = 0; i < h; ++i) {
      xf[size_t(i)] = std::ldexp(float(int(rng() % 20001) - 10000) / 10000, int(rng() % 12) - 6);
      w[size_t(i)] = 0.5f + float(rng() % 1000) / 1000;
      xb[size_t(i)] = f32_to_bf16(xf[size_t(i)]);
    }
    expect_rms_row_matches(xf, DType::f32, w);
    expect_rms_row_matches(xb, DType::bf16, w);
  }
}

// The sum of squares alone, on rows whose values span 2^-20 .. 2^20 so that any other order of
// the partial sums or of their combination changes the bits, against the CPU's row kernels.
TEST(CudaRmsMath, SumOfSquaresOrderIsTheCpus) {
  int orders_differ = 0;
  for (int64_t h : {5, 64, 100, 1031, 7168})
    for (DType t : {DType::f32, DType::bf16}) {
      std::mt19937_64 rng{uint64_t(h) * 3 + uint64_t(t)};
      std::vector<float> xf(static_cast<size_t>(h));
      std::vector<uint16_t> xb(static_cast<size_t>(h));
      for (int64_t i = 0; i < h; ++i) {
        // Each partial sum in its own binade range, so the combination's order shows in the bits.
        const int binade = int(i % 64) / 3 - 10 + int(rng() % 3);
        xb[size_t(i)] = f32_to_bf16(std::ldexp(1.0f + float(rng() % 4096) / 4096, binade));
        xf[size_t(i)] = t == DType::bf16 ? bf16_to_f32(xb[size_t(i)]) : std::ldexp(1.0f + float(rng() % 1000003) / 1000003, binade);
      }
      const void* x = t == DType::bf16 ? static_cast<const void*>(xb.data()) : static_cast<const void*>(xf.data());
      auto element = [&](long long i) { return t == DType::bf16 ? bf16_to_f32(xb[size_t(i)]) : xf[size_t(i)]; };
      float partials[64];
      for (int k = 0; k < 64; ++k) partials[k] = rms_partial(k, t == DType::bf16, h, element);
      const float got = rms_combine(partials);
      EXPECT_EQ(bits_of(got), bits_of(kernels::sum_squares_scalar(x, t, h, tuning().params))) << dtype_name(t) << " h " << h;
      if (cpu_features().best_isa >= Isa::avx512) {
        EXPECT_EQ(bits_of(got), bits_of(kernels::sum_squares_avx512(x, t, h, tuning().params))) << dtype_name(t) << " h " << h;
      }
      float sequential = 0.0f;  // the data must tell orders apart, or this test could not fail
      for (int64_t i = 0; i < h; ++i) sequential = std::fma(element(i), element(i), sequential);
      orders_differ += bits_of(sequential) != bits_of(got);
    }
  EXPECT_GE(orders_differ, 6);
}

}  // namespace
}  // namespace sol
