// TMA descriptor argument rules (cuda.h, cuTensorMapEncodeTiled): each broken rule is a clear
// sol::Error naming the argument, expected and got; the GEMM kernel's own boxes pass.
#include <gtest/gtest.h>

#include "kernels/cuda/sm90/sm90_gemm_boxes.h"
#include "ops/error_message.h"

namespace sol::kernels::sm90 {
namespace {

using testing_errors::message_of;

TmaBox gemm_a_box(u64 m, u64 k) {
  TmaBox t;
  t.global_address = 0x7f0000001000;
  t.rank = 2;
  t.element_bytes = 2;
  t.dims[0] = k;
  t.dims[1] = m;
  t.strides_bytes[1] = k * 2;
  t.box[0] = GemmBf16Plan128x128::block_k;
  t.box[1] = GemmBf16Plan128x128::block_m;
  t.swizzle = GemmBf16Plan128x128::swizzle;
  return t;
}

std::string message_for(const TmaBox& t) { return message_of([&] { check_tma_box(t, "sm90 gemm"); }); }

TEST(Sm90TmaRules, TheGemmKernelsBoxesAreValid) {
  EXPECT_EQ(message_for(gemm_a_box(4096, 7168)), "(no error)");
  alignas(16) static const unsigned char operand[16] = {};
  const TmaBox a = gemm_tile_operand_box<GemmBf16Plan128x128>(operand, 4096, 7168, 7168, 128, "sm90 gemm");
  EXPECT_EQ(a.box[0] * a.element_bytes, 128u);  // one swizzled row of K
  EXPECT_EQ(a.box[1], 128u);
  EXPECT_EQ(a.strides_bytes[1], 7168u * 2);
  const TmaBox b = gemm_tile_operand_box<GemmE4m3Plan128x128>(operand, 24576, 1536, 1536, 128, "sm90 gemm");
  EXPECT_EQ(b.box[0], 128u);
  EXPECT_EQ(b.element_bytes, 1u);
  EXPECT_EQ(b.swizzle, Swizzle::b128);
}

TEST(Sm90TmaRules, TheGemmKernelsBoxesRejectWhatTmaCannotLoad) {
  alignas(16) static const unsigned char operand[32] = {};
  EXPECT_EQ(message_of([] { gemm_tile_operand_box<GemmBf16Plan128x128>(operand, 64, 60, 60, 128, "sm90 gemm"); }),
            "sm90 gemm: TMA strides_bytes[1] = 120 is not a multiple of 16");
  const std::string misaligned =
      message_of([] { gemm_tile_operand_box<GemmBf16Plan128x128>(operand + 4, 64, 64, 64, 128, "sm90 gemm"); });
  EXPECT_EQ(misaligned.rfind("sm90 gemm: TMA global address 0x", 0), 0u) << misaligned;
  EXPECT_NE(misaligned.find(" is not 16-byte aligned"), std::string::npos) << misaligned;
}

TEST(Sm90TmaRules, EachBrokenRuleNamesItsArgument) {
  struct Case {
    void (*breaks)(TmaBox&);
    const char* message;
  };
  const Case cases[] = {
      {[](TmaBox& t) { t.global_address += 8; }, "sm90 gemm: TMA global address 0x7f0000001008 is not 16-byte aligned"},
      {[](TmaBox& t) { t.strides_bytes[1] = 2 * 100; }, "sm90 gemm: TMA strides_bytes[1] = 200 is not a multiple of 16"},
      {[](TmaBox& t) { t.strides_bytes[1] = u64(1) << 40; },
       "sm90 gemm: TMA strides_bytes[1] = 1099511627776 but it must be below 2^40"},
      {[](TmaBox& t) { t.box[1] = 257; }, "sm90 gemm: TMA box[1] = 257 but it must be 1..256"},
      {[](TmaBox& t) { t.box[0] = 0; }, "sm90 gemm: TMA box[0] = 0 but it must be 1..256"},
      {[](TmaBox& t) { t.box[0] = 128; }, "sm90 gemm: TMA inner box = 256 bytes but the 128B swizzle allows at most 128"},
      {[](TmaBox& t) { t.box[0] = 12; }, "sm90 gemm: TMA inner box = 24 bytes is not a multiple of 16"},
      {[](TmaBox& t) { t.dims[1] = 0; }, "sm90 gemm: TMA dims[1] = 0 but it must be 1..2^32"},
      {[](TmaBox& t) { t.dims[0] = (u64(1) << 32) + 1; }, "sm90 gemm: TMA dims[0] = 4294967297 but it must be 1..2^32"},
      {[](TmaBox& t) { t.element_strides[1] = 9; }, "sm90 gemm: TMA element_strides[1] = 9 but it must be 1..8"},
      {[](TmaBox& t) { t.rank = 6; }, "sm90 gemm: TMA rank = 6 but it must be 1..5"},
      {[](TmaBox& t) { t.element_bytes = 3; }, "sm90 gemm: TMA element size = 3 bytes but it must be 1, 2, 4 or 8"},
      {[](TmaBox& t) { t.swizzle = Swizzle::b64; }, "sm90 gemm: TMA inner box = 128 bytes but the 64B swizzle allows at most 64"},
  };
  for (const Case& c : cases) {
    TmaBox t = gemm_a_box(4096, 7168);
    c.breaks(t);
    EXPECT_EQ(message_for(t), c.message);
  }
}

TEST(Sm90TmaRules, ASmallerInnerBoxThanTheSwizzleIsAllowed) {
  TmaBox t = gemm_a_box(64, 64);
  t.box[0] = 32;  // 64 bytes under a 128-byte swizzle: allowed by the driver's rule (<=)
  EXPECT_EQ(message_for(t), "(no error)");
  t.swizzle = Swizzle::none;
  t.box[0] = 256;
  EXPECT_EQ(message_for(t), "(no error)");
}

}  // namespace
}  // namespace sol::kernels::sm90
