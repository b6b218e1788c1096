#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/quant/reference.h"
#include "ops/isa_paths.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/quant.h"

namespace sol {
namespace {

using testing_paths::for_each_isa;

bool same_bytes(const Buffer& a, const Buffer& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.tensor().nbytes()) == 0;
}

TEST(QuantFp8, PerTokenMatchesReferenceBitForBit) {
  for_each_isa([] {
    for (DType dt : {DType::bf16, DType::f32})
      for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0})
        for (int64_t rows : {1, 7, 64}) {
          const int64_t cols = 896;
          QuantOptions opt;
          opt.scale = sf;
          Buffer x(dt, {rows, cols}), q(DType::f8e4m3, {rows, cols}), s(DType::f32, {rows, cols / 128});
          Buffer qr(DType::f8e4m3, {rows, cols}), sr(DType::f32, {rows, cols / 128});
          fill_random_with_specials(x, uint64_t(rows) * 7 + uint64_t(dt), 97);
          // Group 1 of row 0: all zeros (the 1e-4 floor); group 2: a range of magnitudes.
          for (int64_t c = 128; c < 256; ++c) store_from_double(x.data(), dt, size_t(c), 0.0);
          for (int64_t c = 256; c < 384; ++c) store_from_double(x.data(), dt, size_t(c), std::ldexp(1.0, int(c % 40) - 20));
          poison(q);
          poison(s);
          quant_fp8_per_token(x, q, s, opt);
          reference::quant_fp8_per_token(x, qr, sr, opt);
          EXPECT_TRUE(same_bytes(q, qr)) << dtype_name(dt) << " rows=" << rows;
          EXPECT_TRUE(same_bytes(s, sr)) << dtype_name(dt) << " rows=" << rows;
          EXPECT_FLOAT_EQ(s.tensor().data_as<float>()[1], 1e-4f / 448.0f * (sf == ScaleFormat::f32 ? 1.0f : 0.0f) +
                                                             (sf == ScaleFormat::ue8m0 ? std::ldexp(1.0f, -22) : 0.0f));
        }
  });
}

TEST(QuantFp8, Ue8m0ScalesArePowersOfTwoCoveringAmax) {
  const int64_t rows = 5, cols = 512;
  Buffer x(DType::f32, {rows, cols}), q(DType::f8e4m3, {rows, cols}), s(DType::f32, {rows, 4});
  fill_random(x, 3, 1000.0);
  quant_fp8_per_token(x, q, s, {128, ScaleFormat::ue8m0});
  for (int64_t g = 0; g < rows * 4; ++g) {
    float sc = s.tensor().data_as<float>()[g];
    int e;
    EXPECT_EQ(std::frexp(sc, &e), 0.5f) << sc;
    float amax = 0;
    for (int64_t c = 0; c < 128; ++c) amax = std::max(amax, std::fabs(x.tensor().data_as<float>()[g * 128 + c]));
    EXPECT_GE(sc * 448.0f, amax);
    EXPECT_LT(sc * 224.0f, amax);
  }
}

TEST(QuantFp8, PerBlockWithPartialLastBlockRow) {
  for_each_isa([] {
    const int64_t rows = 300, cols = 384;
    for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0}) {
      Buffer w(DType::bf16, {rows, cols}), q(DType::f8e4m3, {rows, cols}), s(DType::f32, {3, 3});
      Buffer qr(DType::f8e4m3, {rows, cols}), sr(DType::f32, {3, 3});
      fill_random_with_specials(w, 9, 5000);
      poison(q);
      poison(s);
      quant_fp8_per_block(w, q, s, {128, sf});
      reference::quant_fp8_per_block(w, qr, sr, {128, sf});
      EXPECT_TRUE(same_bytes(q, qr));
      EXPECT_TRUE(same_bytes(s, sr));
    }
  });
}

TEST(QuantFp8, NaNPoisonsOnlyItsGroup) {
  const int64_t cols = 256;
  Buffer x(DType::f32, {1, cols}), q(DType::f8e4m3, {1, cols}), s(DType::f32, {1, 2});
  fill_random(x, 1);
  x.tensor().data_as<float>()[5] = NAN;
  quant_fp8_per_token(x, q, s);
  EXPECT_TRUE(std::isnan(s.tensor().data_as<float>()[0]));
  EXPECT_FALSE(std::isnan(s.tensor().data_as<float>()[1]));
  for (int c = 0; c < 128; ++c) EXPECT_EQ(q.tensor().data_as<uint8_t>()[c] & 0x7F, 0x7F);
  for (int c = 128; c < 256; ++c) EXPECT_NE(q.tensor().data_as<uint8_t>()[c] & 0x7F, 0x7F);
}

TEST(QuantFp8, RoundTripErrorFitsE4m3) {
  for_each_isa([] {
    const int64_t rows = 33, cols = 1024;
    Buffer x(DType::bf16, {rows, cols}), q(DType::f8e4m3, {rows, cols}), s(DType::f32, {rows, 8});
    Buffer y(DType::bf16, {rows, cols}), yr(DType::bf16, {rows, cols});
    fill_random(x, 21, 50.0);
    quant_fp8_per_token(x, q, s);
    poison(y);
    dequant_fp8_per_token(q, s, y);
    reference::dequant_fp8_per_token(q, s, yr, {});
    EXPECT_TRUE(same_bytes(y, yr));
    CheckResult r = compare_relative(y, x, 4e-2);
    EXPECT_TRUE(r.pass) << r.detail;
    EXPECT_GT(r.error, 1e-3);  // e4m3 really did round: the check is not comparing x with x
  });
}

TEST(QuantFp8, BadInputIsNamed) {
  Buffer x(DType::bf16, {4, 200}), q(DType::f8e4m3, {4, 200}), s(DType::f32, {4, 1});
  EXPECT_THROW(quant_fp8_per_token(x, q, s), Error);  // 200 % 128
  Buffer x2(DType::bf16, {4, 256}), q2(DType::f8e4m3, {4, 256}), s2(DType::f32, {4, 3});
  try {
    quant_fp8_per_token(x2, q2, s2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("scales.shape = [4, 3] but expected [4, 2]"), std::string::npos) << e.what();
  }
  Buffer s3(DType::f32, {4, 2}), qb(DType::bf16, {4, 256}), xi(DType::i8, {4, 256});
  EXPECT_THROW(quant_fp8_per_token(x2, qb, s3), Error);
  EXPECT_THROW(quant_fp8_per_token(xi, q2, s3), Error);
  EXPECT_THROW(quant_fp8_per_block(x2, q2, Buffer(DType::f32, {2, 2}).tensor()), Error);
  EXPECT_THROW(quant_fp8_per_token(x2, q2, s3, {100, ScaleFormat::f32}), Error);
  Buffer y(DType::f16, {4, 256});
  EXPECT_THROW(dequant_fp8_per_token(q2, s3, y), Error);
}

}  // namespace
}  // namespace sol
