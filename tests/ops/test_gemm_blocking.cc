// GEMM's cache blocking: MC keeps the packed A block's bytes, whatever a K step of A takes.
#include <gtest/gtest.h>

#include "ops/gemm/blocking.h"

namespace sol::gemm_detail {
namespace {

TEST(GemmBlocking, McHoldsTheABlocksBytes) {
  TuningParams tune;
  tune.gemm_mc = 480;
  tune.gemm_nc = 4096;
  const auto mc = [&](DType in, int64_t step_bytes) {
    return choose_blocking(tune, in, 4096, 4096, 4096, 4096, false, step_bytes).mc;
  };
  EXPECT_EQ(mc(DType::bf16, 4), 480);  // bf16 pairs: 1024 steps of 4 bytes, 4 KiB a row
  EXPECT_EQ(mc(DType::i8, 4), 480);    // int8 quads at KC 4096: 4 KiB a row
  EXPECT_EQ(mc(DType::bf16, 8), 240);  // bf16 widened to f32 pairs: 8 KiB a row
  EXPECT_EQ(mc(DType::f32, 4), 240);   // f32: 2048 steps of 4 bytes
  tune.gemm_mc = 48;
  EXPECT_EQ(mc(DType::f32, 4), 24);
  tune.gemm_mc = 480;
  // The A step never moves KC (the summation order).
  EXPECT_EQ(choose_blocking(tune, DType::bf16, 4096, 4096, 4096, 8192, false, 8).kc,
            choose_blocking(tune, DType::bf16, 4096, 4096, 4096, 8192, false, 4).kc);
}

}  // namespace
}  // namespace sol::gemm_detail
