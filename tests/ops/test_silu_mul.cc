#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "ops/common/fill.h"
#include "ops/bf16_ulps.h"
#include "ops/isa_paths.h"
#include "sol/activation.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/registry.h"

namespace sol {
namespace {

TEST(SiluMul, ExtremesOnEveryPath) {
  for (Isa isa : {Isa::scalar, Isa::avx512}) {
    if (isa > cpu_features().best_isa) continue;
    setenv("SOL_ISA", std::string(isa_name(isa)).c_str(), 1);
    SCOPED_TRACE(std::string(isa_name(isa)));
    const float g[] = {-200.0f, -88.0f, 0.0f, 1.0f, 30.0f, 100.0f, NAN, -1e-30f};
    const int n = sizeof(g) / sizeof(g[0]);
    Buffer gu(DType::f32, {1, 2 * n}), y(DType::f32, {1, n});
    for (int i = 0; i < n; ++i) {
      gu.tensor().data_as<float>()[i] = g[i];
      gu.tensor().data_as<float>()[n + i] = 2.0f;
    }
    silu_mul(gu, y);
    const float* out = y.tensor().data_as<float>();
    for (int i = 0; i < n; ++i) {
      double expect = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * 2.0;
      if (std::isnan(g[i])) EXPECT_TRUE(std::isnan(out[i]));
      else EXPECT_NEAR(out[i], expect, 1e-6 * std::fabs(expect) + 1e-37) << "g=" << g[i];
    }
    EXPECT_FALSE(std::isnan(out[0]));  // exp overflow must give the limit, not inf/inf
  }
  unsetenv("SOL_ISA");
}

// Every one of the 65536 bf16 gates, as [256, 2 * 256] rows of gate_up (so the two-row kernels
// run too), each against several up values (1, -2.5, 1e-30 and random ones; finite):
// - bf16 output: the correctly rounded fp64 silu(g) * u or one of its neighbours (1 ulp), the
//   whole range included: the AVX-512 and AVX2 kernels compute bf16 outputs with cheaper kernels
//   of their own (~1.8e-3 and ~3e-3 relative, silu_times_bf16 in activation_avx512.cc and
//   activation_avx2.cc), which keep the tail where silu(g) is a bf16 subnormal (g down to ~-92);
// - f32 output: within 1e-6 relative (+1e-37) for g > -88, where exp(-g) is finite in f32;
//   below it the f32 kernels give the limit, +-0 (SiluMul.ExtremesOnEveryPath), as does the
//   scalar path's bf16 output, the rounding of its f32 one;
// - NaN in g or u gives NaN; g = -inf gives NaN (-inf / inf, as the fp64 reference); g = +inf
//   gives inf times u's sign (NaN for u = 0); products beyond f32's range give inf.
TEST(SiluMul, EveryBf16GateAgainstFp64) {
  Buffer gu(DType::bf16, {256, 512}), y16(DType::bf16, {256, 256}), y32(DType::f32, {256, 256});
  uint16_t* p = gu.tensor().data_as<uint16_t>();
  Buffer random_u(DType::bf16, {256, 256});
  fill_random(random_u, 11, 3.0);
  for (int pass = 0; pass < 4; ++pass) {
    SCOPED_TRACE("pass " + std::to_string(pass));
    for (int i = 0; i < 65536; ++i) {
      const float fixed[] = {1.0f, -2.5f, 1e-30f};
      p[(i / 256) * 512 + i % 256] = uint16_t(i);
      p[(i / 256) * 512 + 256 + i % 256] = pass < 3 ? f32_to_bf16(fixed[pass]) : random_u.tensor().data_as<uint16_t>()[i];
    }
    testing_paths::for_each_isa([&] {
      const bool vector_path = active_isa() >= Isa::avx2;
      poison(y16);
      poison(y32);
      silu_mul(gu, y16);
      silu_mul(gu, y32);
      int64_t wrong = 0;
      for (int i = 0; i < 65536; ++i) {
        const double g = bf16_to_f32(uint16_t(i)), u = bf16_to_f32(p[(i / 256) * 512 + 256 + i % 256]);
        const uint16_t got = y16.tensor().data_as<uint16_t>()[i];
        const float got32 = y32.tensor().data_as<float>()[i];
        const double ref = g / (1 + std::exp(-g)) * u;
        bool ok;
        if (std::isnan(ref)) {
          ok = std::isnan(bf16_to_f32(got)) && std::isnan(got32);
        } else if (std::isinf(float(ref))) {  // beyond f32's range (g = inf, or g u > 3.4e38)
          ok = got32 == float(ref) && testing_bf16::bf16_ulps_apart(got, f32_to_bf16(float(ref))) <= 1;
        } else {
          const bool f32_exp_range = g > -88.0;
          ok = (!vector_path && !f32_exp_range) ||
               testing_bf16::bf16_ulps_apart(got, testing_bf16::bf16_rounded(ref)) <= 1;
          ok = ok && (!f32_exp_range || std::fabs(got32 - ref) <= 1e-6 * std::fabs(ref) + 1e-37);
        }
        if (!ok && wrong++ < 5)
          ADD_FAILURE() << isa_name(active_isa()) << ": g = " << g << " (0x" << std::hex << i << std::dec
                        << "), u = " << u << ": bf16 0x" << std::hex << got << std::dec << "; f32 " << got32
                        << "; fp64 " << ref;
      }
      EXPECT_EQ(wrong, 0);
    });
  }
}

TEST(SiluMul, BadInputIsNamed) {
  Buffer gu(DType::bf16, {4, 9}), y(DType::bf16, {4, 4});
  EXPECT_THROW(silu_mul(gu, y), Error);  // odd width
  Buffer gu2(DType::bf16, {4, 8}), y3(DType::bf16, {4, 3});
  try {
    silu_mul(gu2, y3);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("silu_mul: y.shape = [4, 3] but expected [4, 4]"), std::string::npos) << e.what();
  }
  Buffer q(DType::f8e4m3, {4, 4}), s(DType::f32, {4, 1});
  EXPECT_THROW(silu_mul_quant_fp8(gu2, q, s), Error);  // 4 % 128
  EXPECT_THROW(silu_mul(Buffer(DType::i8, {4, 8}).tensor(), y3), Error);
}

}  // namespace
}  // namespace sol

namespace sol {
namespace {

using testing_bf16::bf16_rounded;
using testing_bf16::bf16_ulps_apart;
using testing_paths::for_each_isa;

TEST(Gelu, BothFormsTrackFp64AcrossTheRange) {
  const int64_t n = 2001;
  Buffer x(DType::f32, {1, n}), y(DType::f32, {1, n});
  for (int64_t i = 0; i < n; ++i) x.tensor().data_as<float>()[i] = float(i - n / 2) * 0.01f;  // [-10, 10]
  for (Isa isa : {Isa::scalar, Isa::avx512}) {
    if (isa > cpu_features().best_isa) continue;
    setenv("SOL_ISA", std::string(isa_name(isa)).c_str(), 1);
    for (GeluForm form : {GeluForm::tanh, GeluForm::erf}) {
      gelu(x, y, form);
      for (int64_t i = 0; i < n; ++i) {
        double v = x.tensor().data_as<float>()[i];
        // The same identities in double: 1 + erf(z) = erfc(-z), 1 + tanh(u) = 2 / (1 + e^-2u).
        double ref = form == GeluForm::erf ? 0.5 * v * std::erfc(-v / std::sqrt(2.0))
                                           : v / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        // Relative accuracy everywhere, the far negative tail included (1e-37: exact zeros).
        EXPECT_NEAR(y.tensor().data_as<float>()[i], ref, 1e-5 * std::fabs(ref) + 1e-37)
            << isa_name(isa) << (form == GeluForm::erf ? " erf x=" : " tanh x=") << v;
      }
    }
  }
  unsetenv("SOL_ISA");
}

// Every one of the 65536 bf16 inputs, as [256, 256] rows (so the two-row kernels run too):
// - bf16 output: the correctly rounded fp64 GELU or one of its neighbours (1 ulp), across the
//   whole range, the negative tail down to bf16's subnormals included. This is the rule for
//   bf16 outputs: the AVX-512 kernel computes them with a cheaper kernel of their own (relative
//   error ~2e-4, activation_avx512.cc), so they need not be the rounding of the f32 output;
// - f32 output: relative error against fp64 below tol (erf 2e-6: its kernel is at 7.2e-7;
//   tanh 1e-5), with the f32 tests' 1e-37 absolute floor;
// - NaN stays NaN, gelu(+inf) = +inf, gelu(-inf) = NaN (as the fp64 reference: -inf * 0).
// The scalar path's tanh form overflows f32 exp for 2u < -88.7 (v < -10.05) and flushes outputs
// below ~3.4e-38 to -0: there the 1-ulp rule applies to outputs of at least 1e-37.
TEST(Gelu, EveryBf16InputAgainstFp64) {
  Buffer x(DType::bf16, {256, 256}), y16(DType::bf16, {256, 256}), y32(DType::f32, {256, 256});
  for (int i = 0; i < 65536; ++i) x.tensor().data_as<uint16_t>()[i] = uint16_t(i);
  for_each_isa([&] {
    const bool vector_path = active_isa() >= Isa::avx512;
    for (GeluForm form : {GeluForm::tanh, GeluForm::erf}) {
      SCOPED_TRACE(form == GeluForm::erf ? "erf" : "tanh");
      poison(y16);
      poison(y32);
      gelu(x, y16, form);
      gelu(x, y32, form);
      const double tol = form == GeluForm::erf && vector_path ? 2e-6 : 1e-5;
      int64_t wrong = 0;
      for (int i = 0; i < 65536; ++i) {
        const double v = bf16_to_f32(uint16_t(i));
        const uint16_t got = y16.tensor().data_as<uint16_t>()[i];
        const float got32 = y32.tensor().data_as<float>()[i];
        bool ok;
        double ref = NAN;
        if (std::isnan(v) || v == -INFINITY) {
          ok = std::isnan(bf16_to_f32(got)) && std::isnan(got32);
        } else if (v == INFINITY) {
          ok = bf16_to_f32(got) == INFINITY && got32 == INFINITY;
        } else {
          ref = form == GeluForm::erf ? 0.5 * v * std::erfc(-v / std::sqrt(2.0))
                                      : v / (1 + std::exp(-2 * std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
          const bool strict = vector_path || std::fabs(ref) >= 1e-37;
          ok = bf16_ulps_apart(got, bf16_rounded(ref)) <= 1 || !strict;
          ok = ok && std::fabs(got32 - ref) <= tol * std::fabs(ref) + 1e-37;
        }
        if (!ok && wrong++ < 5)
          ADD_FAILURE() << "x = " << v << " (0x" << std::hex << i << std::dec << "): bf16 0x" << std::hex << got
                        << std::dec << "; f32 " << got32 << "; fp64 " << ref;
      }
      EXPECT_EQ(wrong, 0);
    }
  });
}

TEST(Gelu, NaNPropagatesAndBadInputIsNamed) {
  Buffer x(DType::f32, {1, 3}), y(DType::f32, {1, 3});
  x.tensor().data_as<float>()[0] = NAN;
  x.tensor().data_as<float>()[1] = 1.0f;
  x.tensor().data_as<float>()[2] = -1.0f;
  gelu(x, y, GeluForm::erf);
  EXPECT_TRUE(std::isnan(y.tensor().data_as<float>()[0]));
  EXPECT_THROW(gelu(x, Buffer(DType::f32, {1, 4}).tensor()), Error);
  Buffer q(DType::f8e4m3, {1, 3}), s(DType::f32, {1, 1});
  EXPECT_THROW(gelu_quant_fp8(x, q, s), Error);  // 3 % 128
}

}  // namespace
}  // namespace sol
