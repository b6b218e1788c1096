// Rope's L2 look-ahead (rope_l2_prefetch_heads) beside the L1 one, with tokens paired or one at
// a time (rope_pair_tokens), at every vector level this CPU has: every pairing of the two
// distances that splits the head loops differently (none, within the token, into the next
// token's heads, past them) leaves every bit as the scalar path gives it, on the whole-line
// kernel (32 and 64 wide), the general line (AVX-512) or chunk (AVX2) loop (96), the 16-lane
// or widened loop (40), the half layout and f32, odd head counts, random inputs with specials,
// the nope dims around the slice untouched.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "ops/common/fill.h"
#include "ops/isa_paths.h"
#include "sol/hw.h"
#include "sol/rope.h"
#include "sol/tuning.h"

namespace sol {
namespace {

struct Slice {
  int64_t d;
  RopeLayout layout;
  DType dt;
};

TEST(RopePrefetchL2, EveryDistancePairMatchesScalarBitForBit) {
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no vector path";
  const Slice slices[] = {{64, RopeLayout::interleaved, DType::bf16}, {32, RopeLayout::interleaved, DType::bf16},
                          {96, RopeLayout::interleaved, DType::bf16}, {40, RopeLayout::interleaved, DType::bf16},
                          {36, RopeLayout::half, DType::bf16},        {64, RopeLayout::interleaved, DType::f32}};
  for (const Slice& sl : slices) {
    RopeConfig c = deepseek_v3_rope();
    c.rope_dim = sl.d;
    c.layout = sl.layout;
    const RopeTable table(c, 5000);
    for (int64_t heads : {1, 5, 129})
      for (int64_t tokens : {2, 7}) {
        const int64_t head_dim = 128 + sl.d + 3;  // nope dims before the slice and after it
        Buffer x(sl.dt, {tokens, heads, head_dim}), a(sl.dt, {tokens, heads, head_dim}),
            b(sl.dt, {tokens, heads, head_dim}), pos(DType::i32, {tokens});
        fill_random_with_specials(x, uint64_t(sl.d * 1000 + heads * 10 + tokens), 7);
        for (int64_t t = 0; t < tokens; ++t) pos.tensor().data_as<int32_t>()[t] = int32_t((t * 997 + 13) % 5000);
        std::memcpy(a.data(), x.data(), x.bytes());
        setenv("SOL_ISA", "scalar", 1);
        rope(a, pos, table, 128);
        unsetenv("SOL_ISA");
        ASSERT_NE(std::memcmp(a.data(), x.data(), x.bytes()), 0);  // the rotation moved something
        testing_paths::for_each_isa([&] {
          if (active_isa() == Isa::scalar) return;
          for (int64_t pair : {0, 1})
            for (int64_t ahead : {1, 64, 300})
              for (int64_t ahead2 : {0, 1, 5, 128, 129, 200, 258, 2048}) {
                TuningParams p = tuning().params;
                p.rope_pair_tokens = pair;
                p.rope_prefetch_heads = ahead;
                p.rope_l2_prefetch_heads = ahead2;
                const ScopedTuning forced(p);
                std::memcpy(b.data(), x.data(), x.bytes());
                rope(b, pos, table, 128);
                EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0)
                    << "d " << sl.d << (sl.layout == RopeLayout::half ? " half " : " ") << dtype_name(sl.dt)
                    << " heads " << heads << " tokens " << tokens << " pair " << pair << " ahead " << ahead
                    << " ahead2 " << ahead2;
              }
        });
      }
  }
}

}  // namespace
}  // namespace sol
