// Bad tile programs found by hand and by fuzz/fuzz_tile.cc: each ends in a sol::Error naming
// the file and line (or the kernel and line), never a crash, a wrapped number or an
// "internal error"; and printing a verified program reparses to the same program.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "compiler/ir/rewrite.h"
#include "sol/error.h"
#include "sol/tile.h"

namespace sol::tile {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected sol::Error";
  return "";
}

std::string parse_error(const std::string& text) {
  return error_of([&] { parse(text, "bad.tile"); });
}

std::string verify_error(const std::string& text) {
  return error_of([&] { verify(parse(text, "bad.tile")); });
}

// A kernel whose one element statement is `t[i] = VALUE`.
std::string with_value(const std::string& value) {
  return "kernel k(X: f32[N]) grid(b = N) {\n  alloc t: fragment f32[4]\n  parallel i in t {\n    t[i] = " + value +
         "\n  }\n}\n";
}

std::string with_alloc(const std::string& alloc, const std::string& rest = "") {
  return "kernel k(X: f32[N]) grid(b = N) {\n  alloc t: " + alloc + "\n" + rest + "}\n";
}

TEST(TileHardening, DeepNestingIsAnErrorNamingTheLine) {
  for (const std::string& deep : {std::string(30000, '(') + "1" + std::string(30000, ')'),
                                  std::string(100000, '-') + "1"}) {
    const std::string m = parse_error(with_value(deep));
    EXPECT_NE(m.find("bad.tile:4: expressions nest deeper than"), std::string::npos) << m;
  }
  std::string chain = "1.0";
  for (int i = 0; i < 100000; ++i) chain += " + 1.0";  // read by a loop, but as deep as it is long
  EXPECT_NE(parse_error(with_value(chain)).find("bad.tile:4: expression nests deeper than"), std::string::npos);

  std::string blocks = "kernel k(X: f32[N]) grid(b = N) {\n";
  for (int i = 0; i < 20000; ++i) blocks += "for i" + std::to_string(i) + " in 0 .. 2 {\n";
  const std::string m = parse_error(blocks);
  EXPECT_NE(m.find("bad.tile:65: blocks nest deeper than 64 levels"), std::string::npos) << m;
}

TEST(TileHardening, NestingWithinTheLimitsStillParses) {
  EXPECT_NO_THROW(verify(parse(with_value(std::string(150, '(') + "1.0" + std::string(150, ')')))));
  EXPECT_NO_THROW(verify(parse(with_value(std::string(150, '-') + "1.0"))));
}

// Comparisons do not chain in the grammar, so the printer must parenthesize a comparison
// operand of a comparison on either side; the other levels too (left-associative).
TEST(TileHardening, PrintedExpressionsReparseToTheSameProgram) {
  for (const char* value : {"(1.0 < 2.0) < 3.0", "1.0 < (2.0 < 3.0)", "(1.0 == 2.0) <= (3.0 < 4.0)",
                            "1.0 - (2.0 - 3.0)", "(1.0 - 2.0) - 3.0", "1.0 / (2.0 * 3.0)", "1.0 * -2.0",
                            "-1.0 * 2.0", "1.0 - -2.0", "-(1.0 + 2.0)", "2.0 % (3.0 % 4.0)",
                            "(1.0 < 2.0) + 3.0", "-inf < inf", "max(-1.0, (1.0 < 2.0) == 1.0)"}) {
    const Program p = parse(with_value(value));
    const std::string printed = print(p);
    Program again;
    ASSERT_NO_THROW(again = parse(printed)) << value << "\n" << printed;
    EXPECT_EQ(print(again), printed) << value;
    EXPECT_EQ(print(again.body[1].body[0].exprs[0]), print(p.body[1].body[0].exprs[0])) << value;
  }
  const Program p = parse(with_value("(1.0 < 2.0) < 3.0"));
  EXPECT_EQ(print(p.body[1].body[0].exprs[0]), "(1.0 < 2.0) < 3.0");
}

TEST(TileHardening, NumbersAreReadWholeAndRangeChecked) {
  EXPECT_NE(parse_error("kernel k(X: f32[99999999999999999999]) grid(b = 1) {\n}\n")
                .find("bad.tile:1: integer 99999999999999999999 is out of range"),
            std::string::npos);
  EXPECT_NE(parse_error(with_value("1e400")).find("bad.tile:4: number 1e400 is out of the range of a double"),
            std::string::npos);
  EXPECT_NE(parse_error(with_value("1e")).find("bad.tile:4: malformed number '1e'"), std::string::npos);
  // axis=1e3 was read as axis 1 (std::stoll stops at the 'e').
  const std::string m = verify_error(with_alloc("fragment f32[4, 4]", "  alloc s: fragment f32[4]\n  reduce sum t -> s axis=1e3\n"));
  EXPECT_NE(m.find("line 4"), std::string::npos) << m;
  EXPECT_NE(m.find("attribute axis = '1e3' is not an integer"), std::string::npos) << m;
  EXPECT_NE(verify_error(with_alloc("fragment f32[4]", "  for i in 0 .. 4 stages=99999999999999999999 {\n  }\n"))
                .find("is not an integer"),
            std::string::npos);
}

TEST(TileHardening, FoldingNeverWraps) {
  const Expr big = make_binary("+", make_int(INT64_MAX), make_int(1));
  EXPECT_EQ(fold(big)->kind, ExprNode::binary);
  EXPECT_EQ(fold(make_binary("*", make_int(INT64_MAX), make_int(2)))->kind, ExprNode::binary);
  EXPECT_EQ(fold(make_binary("-", make_int(INT64_MIN + 1), make_int(2)))->kind, ExprNode::binary);
  EXPECT_EQ(fold(make_binary("+", make_int(2), make_int(3)))->ivalue, 5);
}

TEST(TileHardening, TileSizesAreBoundedAtVerify) {
  for (const char* alloc : {"fragment f32[4294967296, 4294967296]", "fragment f32[1000000, 1000000]",
                            "scratch bf16[9223372036854775807, 2]", "fragment f32[8192, 4096]"}) {
    const std::string m = verify_error(with_alloc(alloc));
    EXPECT_NE(m.find("kernel k, line 2: tile t"), std::string::npos) << m;
    EXPECT_NE(m.find("than the 64 MiB a grid cell may hold"), std::string::npos) << m;
    // lower() verifies first: no arena of 0 bytes, no overflow in the layout's byte count.
    EXPECT_NE(error_of([&] { lower(parse(with_alloc(alloc))); }).find("64 MiB"), std::string::npos);
  }
  EXPECT_NO_THROW(verify(parse(with_alloc("fragment f32[4096, 4096]"))));  // exactly 64 MiB
  // Together: each fits, the two do not.
  const std::string m = verify_error(with_alloc("fragment f32[4096, 2048]", "  alloc u: fragment f32[4096, 2049]\n"));
  EXPECT_NE(m.find("kernel k, line 3: tile u"), std::string::npos) << m;
  EXPECT_NE(m.find("past the 64 MiB"), std::string::npos) << m;
  // A packed layout is a 2-D one (its panel geometry reads two dims).
  EXPECT_NE(verify_error(with_alloc("fragment bf16[64] layout=packed_b")).find("must be 2-D"), std::string::npos);
}

TEST(TileHardening, UnrollingIsBounded) {
  const std::string loop = "  for i in 0 .. 1000000000 unroll {\n    fill t, 1.0\n  }\n";
  std::string m = verify_error(with_alloc("fragment f32[4]", loop));
  EXPECT_NE(m.find("kernel k, line 3: unroll of 1000000000 iterations (at most 1024)"), std::string::npos) << m;
  m = error_of([&] { lower(parse(with_alloc("fragment f32[4]", loop))); });
  EXPECT_NE(m.find("unroll of 1000000000 iterations"), std::string::npos) << m;
  // Nested unrolls multiply: 1024 x 1024 copies of a fill.
  m = verify_error(with_alloc("fragment f32[4]",
                              "  for i in 0 .. 1024 unroll {\n    for j in 0 .. 1024 unroll {\n      fill t, 1.0\n    }\n  }\n"));
  EXPECT_NE(m.find("more than 65536 statements"), std::string::npos) << m;
  m = verify_error(with_alloc("fragment f32[4]", "  for i in 0 .. N tile=4096 unroll {\n    fill t, 1.0\n  }\n"));
  EXPECT_NE(m.find("unroll of 4096 iterations"), std::string::npos) << m;
  EXPECT_NO_THROW(lower(parse(with_alloc("fragment f32[4]", "  for i in 0 .. 1024 unroll {\n    fill t, 1.0\n  }\n"))));
}

TEST(TileHardening, BadBytesAreEscapedInMessages) {
  const std::string nul = parse_error(with_value(std::string("1.0 ") + '\0' + " 2.0"));
  EXPECT_NE(nul.find("bad.tile:4: unexpected character '\\x00'"), std::string::npos) << nul;
  const std::string half = parse_error(with_value("\xc3"));  // the first byte of a two-byte character
  EXPECT_NE(half.find("bad.tile:4: unexpected character '\\xc3'"), std::string::npos) << half;
  for (char c : nul + half) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << int(c);
}

}  // namespace
}  // namespace sol::tile
