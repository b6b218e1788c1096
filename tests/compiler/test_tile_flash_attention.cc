// Flash attention written in the DSL (examples/tile/flash_attention.tile), compiled for the CPU:
// against its own program (the interpreter) and against sol::flash_attention, on ragged shapes
// (query and key counts that are not multiples of the 64/128 blocks), with sol's [B, S, H, D]
// tensors viewed as the program's [B, H, S, D] through strides.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

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

  // Against its own program: the same arithmetic up to summation order and exp2 rounding.
  CheckResult r = compare_relative(o, o_int, 1e-2);
  EXPECT_TRUE(r.pass) << "o vs interpreter: " << r.error << " " << r.detail;
  r = compare_relative(lse, lse_int, 1e-5);
  EXPECT_TRUE(r.pass) << "lse vs interpreter: " << r.error << " " << r.detail;
  // Against the hand-written operator: bf16 outputs, P rounded to bf16 in both; its exp2 is a
  // polynomial and its sums run in another order, hence the looser lse bound.
  r = compare_relative(o, o_ref, 1e-2);
  EXPECT_TRUE(r.pass) << "o vs sol::flash_attention: " << r.error << " " << r.detail;
  r = compare_relative(lse, lse_ref, 2e-4);
  EXPECT_TRUE(r.pass) << "lse vs sol::flash_attention: " << r.error << " " << r.detail;
}

INSTANTIATE_TEST_SUITE_P(Shapes, TileFlashAttention,
                         ::testing::Values(Case{1, 2, 100, 150}, Case{2, 1, 1, 1}, Case{1, 1, 130, 256},
                                           Case{1, 3, 64, 37}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           return "b" + std::to_string(c.b) + "_h" + std::to_string(c.h) + "_sq" +
                                  std::to_string(c.sq) + "_skv" + std::to_string(c.skv);
                         });

TEST(TileFlashAttentionProgram, IsShortAndRoundTrips) {
  const Program p = example("flash_attention.tile");
  EXPECT_EQ(print(parse(print(p))), print(p));
  int lines = 0;
  for (char ch : print(p)) lines += ch == '\n';
  EXPECT_LE(lines, 80);  // the bar: the hardest kernels in under ~80 lines
}

}  // namespace
}  // namespace sol::tile
