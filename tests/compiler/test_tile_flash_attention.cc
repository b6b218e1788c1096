// Flash attention written in the DSL (examples/tile/flash_attention.tile), compiled for the CPU:
// against its own program (the interpreter) and against sol::flash_attention, on ragged shapes
// (query and key counts that are not multiples of the 64/128 blocks), with sol's [B, S, H, D]
// tensors viewed as the program's [B, H, S, D] through strides.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/attention.h"
#include "sol/tile.h"
#include "tile_test_util.h"

namespace sol::tile {
namespace {

using testing::example;
using testing::test_cache_dir;

// [B, S, H, D] storage seen as [B, H, S, D].
Tensor heads_major(const Buffer& b) {
  const Tensor t = b.tensor();
  const int64_t shape[4] = {t.shape()[0], t.shape()[2], t.shape()[1], t.shape()[3]};
  const int64_t stride[4] = {t.stride(0), t.stride(2), t.stride(1), t.stride(3)};
  return Tensor(t.data(), t.dtype(), shape, stride);
}

// The compiled kernel's o and lse against its own program (the same arithmetic up to summation
// order and exp2 rounding) and against the hand-written operator (bf16 outputs, P rounded to
// bf16 in both; its exp2 is a polynomial and its sums run in another order, hence the looser
// lse bound).
void expect_matches(const Buffer& o, const Buffer& lse, const Buffer& o_int, const Buffer& lse_int,
                    const Buffer& o_ref, const Buffer& lse_ref) {
  CheckResult r = compare_relative(o, o_int, 1e-2);
  EXPECT_TRUE(r.pass) << "o vs interpreter: " << r.error << " " << r.detail;
  r = compare_relative(lse, lse_int, 1e-5);
  EXPECT_TRUE(r.pass) << "lse vs interpreter: " << r.error << " " << r.detail;
  r = compare_relative(o, o_ref, 1e-2);
  EXPECT_TRUE(r.pass) << "o vs sol::flash_attention: " << r.error << " " << r.detail;
  r = compare_relative(lse, lse_ref, 2e-4);
  EXPECT_TRUE(r.pass) << "lse vs sol::flash_attention: " << r.error << " " << r.detail;
}

// A gtest case name from (prefix, value) pairs, appended in place (GCC 12 reports a false
// -Wrestrict on chains of `"x" + std::to_string(...)`).
std::string case_name(std::initializer_list<std::pair<const char*, int64_t>> parts) {
  std::string name;
  for (const auto& [prefix, value] : parts) {
    name += prefix;
    name += std::to_string(value);
  }
  return name;
}

struct Case {
  int64_t b, h, sq, skv;
};

class TileFlashAttention : public ::testing::TestWithParam<Case> {};

TEST_P(TileFlashAttention, MatchesInterpreterAndSolFlashAttention) {
  const Case c = GetParam();
  constexpr int64_t d = 128;
  test_cache_dir();
  const Program prog = example("flash_attention.tile");
  auto kernel = compile(prog);

  Buffer q(DType::bf16, {c.b, c.sq, c.h, d}), k(DType::bf16, {c.b, c.skv, c.h, d}), v(DType::bf16, {c.b, c.skv, c.h, d});
  fill_random(q, 1, 2.0);
  fill_random(k, 2, 2.0);
  fill_random(v, 3, 1.0);
  Buffer o(DType::bf16, {c.b, c.sq, c.h, d}), lse(DType::f32, {c.b, c.h, c.sq});
  Buffer o_int(DType::bf16, {c.b, c.sq, c.h, d}), lse_int(DType::f32, {c.b, c.h, c.sq});
  Buffer o_ref(DType::bf16, {c.b, c.sq, c.h, d}), lse_ref(DType::f32, {c.b, c.h, c.sq});
  poison(o);
  poison(lse);
  std::memset(o_int.data(), 0, size_t(o_int.tensor().nbytes()));
  std::memset(lse_int.data(), 0, size_t(lse_int.tensor().nbytes()));

  const Tensor args[] = {heads_major(q), heads_major(k), heads_major(v), heads_major(o), lse.tensor()};
  (*kernel)(args);
  const Tensor args_int[] = {heads_major(q), heads_major(k), heads_major(v), heads_major(o_int), lse_int.tensor()};
  interpret(prog, args_int);
  flash_attention(q, k, v, o_ref, lse_ref);

  expect_matches(o, lse, o_int, lse_int, o_ref, lse_ref);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TileFlashAttention,
                         ::testing::Values(Case{1, 2, 100, 150}, Case{2, 1, 1, 1}, Case{1, 1, 130, 256},
                                           Case{1, 3, 64, 37}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           return case_name({{"b", c.b}, {"_h", c.h}, {"_sq", c.sq}, {"_skv", c.skv}});
                         });

// Causal attention with grouped-query heads (examples/tile/flash_attention_causal_gqa.tile):
// G kv heads, each read by R query heads. sol's q [B, S, G * R, D] is the program's
// [B, G, R, S, D] (query head g * R + r reads kv head g, as sol::flash_attention maps head h to
// h / R), its lse [B, G * R, S] the program's [B, G, R, S].
Tensor grouped_heads(const Buffer& b, int64_t groups) {
  const Tensor t = b.tensor();
  const int64_t r = t.shape()[2] / groups;
  const int64_t shape[5] = {t.shape()[0], groups, r, t.shape()[1], t.shape()[3]};
  const int64_t stride[5] = {t.stride(0), r * t.stride(2), t.stride(2), t.stride(1), t.stride(3)};
  return Tensor(t.data(), t.dtype(), shape, stride);
}
Tensor grouped_lse(const Buffer& b, int64_t groups) {
  const Tensor t = b.tensor();
  const int64_t r = t.shape()[1] / groups;
  const int64_t shape[4] = {t.shape()[0], groups, r, t.shape()[2]};
  const int64_t stride[4] = {t.stride(0), r * t.stride(1), t.stride(1), t.stride(2)};
  return Tensor(t.data(), t.dtype(), shape, stride);
}

struct CausalCase {
  int64_t b, groups, rep, sq, skv;
};

class TileCausalGqa : public ::testing::TestWithParam<CausalCase> {};

TEST_P(TileCausalGqa, MatchesInterpreterAndSolFlashAttention) {
  const CausalCase c = GetParam();
  constexpr int64_t d = 128;
  const int64_t hq = c.groups * c.rep;
  test_cache_dir();
  const Program prog = example("flash_attention_causal_gqa.tile");
  auto kernel = compile(prog);

  Buffer q(DType::bf16, {c.b, c.sq, hq, d}), k(DType::bf16, {c.b, c.skv, c.groups, d}),
      v(DType::bf16, {c.b, c.skv, c.groups, d});
  fill_random(q, 11, 2.0);
  fill_random(k, 12, 2.0);
  fill_random(v, 13, 1.0);
  Buffer o(DType::bf16, {c.b, c.sq, hq, d}), lse(DType::f32, {c.b, hq, c.sq});
  Buffer o_int(DType::bf16, {c.b, c.sq, hq, d}), lse_int(DType::f32, {c.b, hq, c.sq});
  Buffer o_ref(DType::bf16, {c.b, c.sq, hq, d}), lse_ref(DType::f32, {c.b, hq, c.sq});
  poison(o);
  poison(lse);
  std::memset(o_int.data(), 0, size_t(o_int.tensor().nbytes()));
  std::memset(lse_int.data(), 0, size_t(lse_int.tensor().nbytes()));

  const Tensor args[] = {grouped_heads(q, c.groups), heads_major(k), heads_major(v), grouped_heads(o, c.groups),
                         grouped_lse(lse, c.groups)};
  (*kernel)(args);
  const Tensor args_int[] = {grouped_heads(q, c.groups), heads_major(k), heads_major(v),
                             grouped_heads(o_int, c.groups), grouped_lse(lse_int, c.groups)};
  interpret(prog, args_int);
  AttentionOptions opt;
  opt.causal = true;
  flash_attention(q, k, v, o_ref, lse_ref, opt);

  expect_matches(o, lse, o_int, lse_int, o_ref, lse_ref);
  if (c.sq > c.skv) {  // the first sq - skv rows see no key: o = 0, lse = -inf, as sol's
    const float* l = static_cast<const float*>(lse.data());
    EXPECT_TRUE(std::isinf(l[0]) && l[0] < 0) << l[0];
  }
}

// S < T (every row sees a prefix of the keys and more), S = T across block edges, S > T (rows
// with no key), one token, R = 1 (plain multi-head) to R = 4, batch 2.
INSTANTIATE_TEST_SUITE_P(Shapes, TileCausalGqa,
                         ::testing::Values(CausalCase{1, 2, 2, 100, 150}, CausalCase{1, 1, 3, 130, 130},
                                           CausalCase{1, 2, 1, 150, 100}, CausalCase{2, 1, 2, 1, 1},
                                           CausalCase{1, 1, 4, 64, 300}, CausalCase{1, 1, 1, 257, 257}),
                         [](const auto& info) {
                           const CausalCase& c = info.param;
                           return case_name(
                               {{"b", c.b}, {"_g", c.groups}, {"_r", c.rep}, {"_sq", c.sq}, {"_skv", c.skv}});
                         });

TEST(TileFlashAttentionProgram, IsShortAndRoundTrips) {
  for (const char* name : {"flash_attention.tile", "flash_attention_causal_gqa.tile"}) {
    const Program p = example(name);
    EXPECT_EQ(print(parse(print(p))), print(p));
    int lines = 0;
    for (char ch : print(p)) lines += ch == '\n';
    EXPECT_LE(lines, 80) << name;  // the bar: the hardest kernels in under ~80 lines
  }
}

}  // namespace
}  // namespace sol::tile
