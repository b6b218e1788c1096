// The amx level's e4m3 -> bf16 widening (kernels/x86/amx/e4m3_vbmi.h, byte tables by VPERMT2B)
// against the scalar code table: every one of the 256 codes in every position of a 64-value
// block, every length 0..200 from unaligned starts (the masked tail), and nothing written past
// the end. It needs AVX-512 and VBMI only, so it runs on Zen 4 and 5 as well as on AMX CPUs.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/e4m3_bf16_table.h"
#include "kernels/gemm.h"
#include "sol/hw.h"

namespace sol {
namespace {

bool has_vbmi() {
  const CpuFeatures& f = cpu_features();
  return f.best_isa >= Isa::avx512 && f.avx512_vbmi;
}

TEST(WidenE4m3Vbmi, EveryCodeInEveryLanePosition) {
  if (!has_vbmi()) GTEST_SKIP() << "no AVX512-VBMI";
  // 256 rotations of the 256 codes: each code lands in each of a block's 64 positions.
  std::vector<uint8_t> src(256 * 256);
  for (int r = 0; r < 256; ++r)
    for (int i = 0; i < 256; ++i) src[size_t(r * 256 + i)] = uint8_t(i + r);
  std::vector<uint16_t> out(src.size(), 0xDEAD);
  kernels::widen_e4m3_vbmi(src.data(), out.data(), int64_t(src.size()));
  int64_t wrong = 0;
  for (size_t i = 0; i < src.size(); ++i) wrong += out[i] != kernels::kE4m3CodesToBf16.bits[src[i]];
  EXPECT_EQ(wrong, 0);
}

TEST(WidenE4m3Vbmi, EveryLengthAndOffsetLeavesTheRestAlone) {
  if (!has_vbmi()) GTEST_SKIP() << "no AVX512-VBMI";
  std::vector<uint8_t> src(300);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 151 + 7);
  for (int64_t offset : {0, 1, 31, 33})
    for (int64_t n = 0; n <= 200; ++n) {
      std::vector<uint16_t> out(size_t(n + 80), 0xDEAD);
      kernels::widen_e4m3_vbmi(src.data() + offset, out.data() + 3, n);
      for (int64_t i = 0; i < int64_t(out.size()); ++i) {
        const bool inside = i >= 3 && i < 3 + n;
        const uint16_t want = inside ? kernels::kE4m3CodesToBf16.bits[src[size_t(offset + i - 3)]] : 0xDEAD;
        ASSERT_EQ(out[size_t(i)], want) << "n " << n << " offset " << offset << " at " << i;
      }
    }
}

}  // namespace
}  // namespace sol
