// Rope's whole-line bf16 kernels (interleaved slices of 32 or 64 values, one or two tokens per
// call, at every vector level this CPU has): bit for bit against the scalar path at every
// prefetch distance that splits the head loop differently (within the token, into the next
// token's heads, past them, none at all), on head counts below, at and far above the distances,
// with special values (zeros, infinities, NaNs, subnormals, which take the narrowing's integer
// path) in the slices and the nope dims around them left untouched.
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

TEST(RopeLines, EveryPrefetchSplitMatchesScalarBitForBit) {
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no vector path";
  for (int64_t d : {32, 64}) {
    RopeConfig c = deepseek_v3_rope();
    c.rope_dim = int(d);
    const RopeTable table(c, 5000);
    for (int64_t heads : {1, 3, 128})
      for (int64_t tokens : {2, 5, 67}) {
        const int64_t head_dim = 128 + d;
        Buffer x(DType::bf16, {tokens, heads, head_dim}), a(DType::bf16, {tokens, heads, head_dim}),
            b(DType::bf16, {tokens, heads, head_dim}), pos(DType::i32, {tokens});
        fill_random_with_specials(x, uint64_t(d * 1000 + heads * 10 + tokens), 7);
        for (int64_t t = 0; t < tokens; ++t) pos.tensor().data_as<int32_t>()[t] = int32_t((t * 997 + 13) % 5000);
        std::memcpy(a.data(), x.data(), x.bytes());
        setenv("SOL_ISA", "scalar", 1);
        rope(a, pos, table, 128);
        unsetenv("SOL_ISA");
        testing_paths::for_each_isa([&] {
          if (active_isa() == Isa::scalar) return;
          for (int64_t pair : {0, 1})
            for (int64_t ahead : {1, 2, 16, 64, 127, 128, 129, 200, 255, 256, 1024}) {
              TuningParams p = tuning().params;
              p.rope_pair_tokens = pair;
              p.rope_prefetch_heads = ahead;
              const ScopedTuning forced(p);
              std::memcpy(b.data(), x.data(), x.bytes());
              rope(b, pos, table, 128);
              EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0)
                  << "d " << d << " heads " << heads << " tokens " << tokens << " pair " << pair << " ahead " << ahead;
            }
        });
      }
  }
}

// The special values reach the slices: a test whose inputs never produce a subnormal result
// would not see the narrowing's integer path.
TEST(RopeLines, SpecialsReachTheSlices) {
  Buffer x(DType::bf16, {5, 3, 192});
  fill_random_with_specials(x, 5 * 1000 + 3 * 10 + 5, 7);
  int subnormal = 0, nan = 0;
  const uint16_t* v = static_cast<const uint16_t*>(x.data());
  for (int64_t i = 0; i < x.tensor().numel(); ++i) {
    if (i % 192 < 128) continue;
    const uint16_t e = v[i] & 0x7F80, m = v[i] & 0x7F;
    subnormal += e == 0 && m != 0;
    nan += e == 0x7F80 && m != 0;
  }
  EXPECT_GT(subnormal, 0);
  EXPECT_GT(nan, 0);
}

}  // namespace
}  // namespace sol
