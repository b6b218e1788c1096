#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "ops/common/fill.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/rope.h"
#include "sol/tuning.h"

namespace sol {
namespace {

TEST(Rope, PlainFrequencies) {
  RopeConfig c;
  c.rope_dim = 8;
  auto f = rope_inv_freq(c);
  ASSERT_EQ(f.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(f[size_t(i)], std::pow(10000.0, -i / 4.0));
  EXPECT_DOUBLE_EQ(rope_attention_factor(c), 1.0);
}

TEST(Rope, DeepSeekV3YarnRamp) {
  // Correction dims for V3: beta_fast 32 -> 10.47 (floor 10), beta_slow 1 -> 22.5 (ceil 23).
  RopeConfig c = deepseek_v3_rope();
  RopeConfig plain = c;
  plain.factor = 1.0;
  auto f = rope_inv_freq(c), p = rope_inv_freq(plain);
  for (int i = 0; i <= 10; ++i) EXPECT_DOUBLE_EQ(f[size_t(i)], p[size_t(i)]) << i;
  for (int i = 23; i < 32; ++i) EXPECT_NEAR(f[size_t(i)], p[size_t(i)] / 40.0, 1e-18) << i;
  double ramp16 = (16.0 - 10.0) / 13.0;
  EXPECT_NEAR(f[16], p[16] / 40.0 * ramp16 + p[16] * (1 - ramp16), 1e-15);
  EXPECT_DOUBLE_EQ(rope_attention_factor(c), 1.0);  // mscale == mscale_all_dim
  c.mscale_all_dim = 0.0;
  EXPECT_NEAR(rope_attention_factor(c), 0.1 * std::log(40.0) + 1.0, 1e-12);
}

// x copied into a and b, a rotated on the scalar path and b on the default one (128 nope dims).
// b: the path SOL_ISA names (the CPU's best when unset); a: the scalar path.
void rope_on_both_paths(const Buffer& x, const Buffer& a, const Buffer& b, const Buffer& pos, const RopeTable& table,
                        const char* level = nullptr) {
  std::memcpy(a.data(), x.data(), x.bytes());
  std::memcpy(b.data(), x.data(), x.bytes());
  setenv("SOL_ISA", "scalar", 1);
  rope(a, pos, table, 128);
  unsetenv("SOL_ISA");
  if (level) setenv("SOL_ISA", level, 1);
  rope(b, pos, table, 128);
  unsetenv("SOL_ISA");
}
TEST(Rope, PositionZeroIsIdentityAndPathsAgreeBitForBit) {
  for (RopeLayout layout : {RopeLayout::interleaved, RopeLayout::half}) {
    RopeConfig c = deepseek_v3_rope();
    c.layout = layout;
    RopeTable table(c, 5000);
    Buffer x(DType::bf16, {6, 4, 192}), a(DType::bf16, {6, 4, 192}), b(DType::bf16, {6, 4, 192}), pos(DType::i32, {6});
    fill_random(x, 1);
    for (int t = 0; t < 6; ++t) pos.tensor().data_as<int32_t>()[t] = t * 997;
    rope_on_both_paths(x, a, b, pos, table);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0);
    EXPECT_EQ(std::memcmp(a.data(), x.data(), 192 * 4 * 2), 0);  // token 0 at position 0
  }
}

// The vector levels rotate two tokens per call (token t with the token half a thread's range
// away, head h of each in turn) and the odd last token alone: every token count around the
// pairing, both layouts and dtypes, a 64-wide slice (whole lines) and a 40-wide one (16-lane or
// widened steps), at each vector level this CPU has, bit for bit against the scalar path.
TEST(Rope, TwoTokensPerCallMatchScalarBitForBit) {
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no vector path";
  for (Isa level : {Isa::avx2, Isa::avx512}) {
    if (level > cpu_features().best_isa) continue;
    for (RopeLayout layout : {RopeLayout::interleaved, RopeLayout::half})
    for (DType dt : {DType::bf16, DType::f32})
      for (int64_t d : {64, 40})
        for (int64_t tokens : {1, 2, 3, 5, 8, 67}) {
          RopeConfig c = deepseek_v3_rope();
          c.layout = layout;
          c.rope_dim = int(d);
          RopeTable table(c, 5000);
          const int64_t heads = 3, head_dim = 128 + d;
          Buffer x(dt, {tokens, heads, head_dim}), a(dt, {tokens, heads, head_dim}), b(dt, {tokens, heads, head_dim});
          Buffer pos(DType::i32, {tokens});
          fill_random(x, uint64_t(tokens + d));
          for (int64_t t = 0; t < tokens; ++t) pos.tensor().data_as<int32_t>()[t] = int32_t((t * 997 + 13) % 5000);
          TuningParams p = tuning().params;
          p.rope_pair_tokens = 1;  // the pairing under test, whatever this machine's tuning chose
          const ScopedTuning paired(p);
          rope_on_both_paths(x, a, b, pos, table, std::string(isa_name(level)).c_str());
          EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0)
              << isa_name(level) << " layout " << int(layout) << " " << dtype_name(dt) << " d " << d << " tokens "
              << tokens;
        }
  }
}

// The AVX2 path: vectors of 8 where the slice allows (interleaved, or half with d / 2 a
// multiple of 8), the scalar arithmetic elsewhere, bit for bit the scalar path either way.
TEST(Rope, Avx2MatchesScalarBitForBit) {
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no AVX2 path";
  for (RopeLayout layout : {RopeLayout::interleaved, RopeLayout::half})
    for (DType dt : {DType::bf16, DType::f32})
      for (int64_t d : {64, 40, 22, 2}) {
        RopeConfig c = deepseek_v3_rope();
        c.layout = layout;
        c.rope_dim = int(d);
        RopeTable table(c, 5000);
        const int64_t tokens = 5, heads = 3, head_dim = 128 + d;
        Buffer x(dt, {tokens, heads, head_dim}), a(dt, {tokens, heads, head_dim}), b(dt, {tokens, heads, head_dim});
        Buffer pos(DType::i32, {tokens});
        fill_random(x, uint64_t(d));
        for (int64_t t = 0; t < tokens; ++t) pos.tensor().data_as<int32_t>()[t] = int32_t((t * 997 + 13) % 5000);
        rope_on_both_paths(x, a, b, pos, table, "avx2");
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.bytes()), 0)
            << "layout " << int(layout) << " " << dtype_name(dt) << " d " << d;
        EXPECT_NE(std::memcmp(a.data(), x.data(), a.bytes()), 0);
      }
}

TEST(Rope, BadInputIsNamed) {
  RopeTable table(deepseek_v3_rope(), 100);
  Buffer x(DType::bf16, {2, 4, 192}), pos(DType::i32, {2});
  pos.tensor().data_as<int32_t>()[0] = 0;
  pos.tensor().data_as<int32_t>()[1] = 100;
  try {
    rope(x, pos, table, 128);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("positions[1] = 100"), std::string::npos) << e.what();
  }
  pos.tensor().data_as<int32_t>()[1] = 5;
  EXPECT_THROW(rope(x, pos, table, 129), Error);  // slice past head_dim
  EXPECT_THROW(rope(Buffer(DType::bf16, {2, 192}).tensor(), pos, table), Error);
  EXPECT_THROW(rope(x, Buffer(DType::f32, {2}).tensor(), table, 128), Error);
  RopeConfig odd;
  odd.rope_dim = 7;
  EXPECT_THROW(RopeTable(odd, 10), Error);
  RopeConfig bad = deepseek_v3_rope();
  bad.beta_slow = 64;
  EXPECT_THROW(rope_inv_freq(bad), Error);
  // A NaN or infinite attention factor (a NaN mscale or mscale_all_dim, an infinite mscale, or
  // one finite in double but past f32's range) is refused before any table is built.
  const std::pair<double, bool> factors[] = {
      {std::nan(""), false}, {std::nan(""), true}, {INFINITY, false}, {1e40, false}};
  for (const auto& [m, all_dim] : factors) {
    RopeConfig scaled = deepseek_v3_rope();
    (all_dim ? scaled.mscale_all_dim : scaled.mscale) = m;
    try {
      RopeTable t(scaled, 4);
      ADD_FAILURE() << "mscale " << m << " all_dim " << all_dim;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attention factor"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sol
