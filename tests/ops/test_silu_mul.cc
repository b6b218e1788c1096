#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "ops/common/fill.h"
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
