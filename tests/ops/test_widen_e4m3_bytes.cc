// The VBMI e4m3 -> bf16 widening (kernels/x86/avx512/e4m3x64_avx512.h, byte tables by VPERMT2B)
// against the scalar code table: every one of the 256 codes in every position of a 64-value
// block, every length 0..200 from unaligned starts (the masked tail), and nothing written past
// the end; and the VBMI nt B packer built on it, against the AVX-512 packer. Both need
// AVX-512 and VBMI only, so they run on Zen 4 and 5 as well as on AMX CPUs.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
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

// The amx level's nt B packer (bytes transposed, then widened) against the AVX-512 one (widened,
// then transposed): every column count 0..32 and step counts across one and two 32-step blocks,
// with the columns' rows at an odd stride. The last column ends where an unreadable page begins,
// so a load past a column's steps faults; nothing may be written past the panel.
TEST(PackBPanelNtVbmi, Fp8PanelsMatchTheAvx512Packer) {
  if (!has_vbmi()) GTEST_SKIP() << "no AVX512-VBMI";
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), span = 4 * page;
  void* map = mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* mem = static_cast<uint8_t*>(map);
  for (size_t i = 0; i < span; ++i) mem[i] = uint8_t(i * 73 + 11);
  ASSERT_EQ(mprotect(mem + span, page, PROT_NONE), 0);
  const int64_t stride = 2 * 97 + 3;  // bytes between columns, room for 97 steps
  for (int valid : {0, 1, 5, 16, 17, 31, 32})
    for (int64_t steps : {0, 1, 2, 31, 32, 33, 63, 64, 65, 97}) {
      const int64_t last = valid > 0 ? valid - 1 : 0;  // the last column read ends at the guard page
      const uint8_t* first = mem + span - 2 * steps - last * stride;
      const void* cols[kernels::kGemmNR];
      for (int c = 0; c < kernels::kGemmNR; ++c) cols[c] = first + std::min<int64_t>(c, last) * stride;
      std::vector<uint32_t> want(size_t(steps * 32 + 16), 0xDEADBEEF), got(want.size(), 0xDEADBEEF);
      kernels::pack_b_panel_nt_avx512(cols, valid, steps, true, want.data());
      kernels::pack_b_panel_nt_vbmi(cols, valid, steps, true, got.data());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(got[i], want[i]) << "valid " << valid << " steps " << steps << " at step " << i / 32 << " column "
                                   << i % 32;
    }
  munmap(map, span + page);
}

}  // namespace
}  // namespace sol
