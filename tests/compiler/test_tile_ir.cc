// Tile IR: the text form round-trips, the builder and the parser agree, and syntax errors name
// the line.
#include <gtest/gtest.h>

#include <sstream>

#include "compiler/bench/dsl_flash_attention.h"
#include "compiler/bench/dsl_gemm.h"
#include "sol/error.h"
#include "sol/tile.h"
#include "tile_test_util.h"

namespace sol::tile {
namespace {

using testing::example;
using testing::read_text;
using testing::source_root;

// Examples are written in printed form; only their full-line comments do not survive.
TEST(TileIr, ExamplesRoundTrip) {
  for (const char* name : {"gemm_bf16.tile", "softmax_rows.tile", "flash_attention.tile", "gemm_bf16_cuda.tile",
                           "flash_attention_cuda.tile"}) {
    const std::string text = read_text(source_root() / "examples/tile" / name);
    ASSERT_FALSE(text.empty()) << name;
    std::istringstream in(text);
    std::string code, l;
    while (std::getline(in, l))
      if (l.find_first_not_of(' ') == std::string::npos || l[l.find_first_not_of(' ')] != '#') code += l + "\n";
    EXPECT_EQ(print(parse(text)), code) << name;
  }
}

TEST(TileIr, BuilderMatchesTextExample) {
  EXPECT_EQ(print(dsl_gemm_bf16()), print(example("gemm_bf16.tile")));
  EXPECT_EQ(print(dsl_flash_attention_bf16()), print(example("flash_attention.tile")));
}

TEST(TileIr, BuilderStampsSourceLines) {
  Builder b("k");
  b.tensor("X", DType::f32, {b.dim("N")});
  b.grid({{"bx", 1}});
  const int line = __LINE__ + 1;
  Handle t = b.fragment("t", DType::f32, {4});
  Program p = b.finish();
  EXPECT_EQ(p.body.at(0).line, line);
  (void)t;
}

TEST(TileIr, ExpressionsPrintWithMinimalParentheses) {
  const std::string text =
      "kernel e(X: f32[N]) grid(bx = ceildiv(N - 1, 4) * 2) {\n"
      "  alloc t: fragment f32[4, 2]\n"
      "  parallel i, j in t {\n"
      "    t[i, j] = (t[i, j] - -1.5) * (2 - j) / exp2(-3) + select(i < j, 1e-30, -inf)\n"
      "  }\n"
      "}\n";
  EXPECT_EQ(print(parse(text)), text);
}

TEST(TileIr, LoweredFormsRoundTrip) {
  const Program lowered = lower(example("gemm_bf16.tile"));
  const std::string text = print(lowered);
  EXPECT_EQ(print(parse(text)), text);
  EXPECT_NE(text.find("ukernel"), std::string::npos);
  EXPECT_NE(text.find("reuse"), std::string::npos);
  const std::string pipelined = print(lower(parse(read_text(testing::golden_dir() / "gemm_edges.in.tile"))));
  EXPECT_EQ(print(parse(pipelined)), pipelined);
  EXPECT_NE(pipelined.find("prefetch"), std::string::npos);
}

TEST(TileIr, SyntaxErrorsNameTheLine) {
  try {
    parse("kernel k(X: f32[N]) grid(b = N) {\n  alloc t: fragment f32[4]\n  copy X[0] => t\n}\n", "bad.tile");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.tile:3"), std::string::npos) << e.what();
  }
  try {
    parse("kernel k(X: f32[N]) grid(b = N) {\n\n  frobnicate X\n}\n", "bad.tile");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.tile:3: unknown op 'frobnicate'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sol::tile
