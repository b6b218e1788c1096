// The verifier: malformed programs fail with sol::Error naming the kernel and the line.
#include <gtest/gtest.h>

#include "sol/error.h"
#include "sol/tile.h"

namespace sol::tile {
namespace {

std::string error_of(const std::string& body) {
  const std::string text = "kernel k(A: bf16[M, K], C: f32[M, K]) grid(bm = ceildiv(M, 16)) {\n" + body + "}\n";
  try {
    lower(parse(text, "t.tile"));
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// lower() refuses `body` with an error that contains `what`.
void expect_error(const std::string& body, const std::string& what) {
  const std::string e = error_of(body);
  EXPECT_NE(e.find(what), std::string::npos) << "expected '" << what << "' in: " << e;
}

TEST(TileVerify, GemmShapeMismatchNamesLine) {
  expect_error(
      "  alloc a: scratch bf16[16, 64]\n"
      "  alloc b: scratch bf16[32, 32]\n"
      "  alloc c: fragment f32[16, 32]\n"
      "  gemm a, b -> c\n",
      "kernel k, line 5: gemm: a.shape[1] = 64 but b.shape[0] = 32");
}

TEST(TileVerify, AccumulatorShapeAndDtype) {
  expect_error(
      "  alloc a: scratch bf16[16, 32]\n  alloc b: scratch bf16[32, 32]\n"
      "  alloc c: fragment f32[16, 16]\n  gemm a, b -> c\n",
      "line 5: gemm: c is [16, 16] but a x b is [16, 32]");
  expect_error(
      "  alloc a: scratch bf16[16, 32]\n  alloc b: scratch bf16[32, 32]\n"
      "  alloc c: fragment bf16[16, 32]\n  gemm a, b -> c\n",
      "must be f32");
}

TEST(TileVerify, UnknownNamesOpsAndFunctions) {
  expect_error("  alloc t: fragment f32[16, 8]\n  copy Q[bm, 0] -> t\n", "line 3");
  expect_error("  alloc t: fragment f32[16, 8]\n  parallel i, j in t {\n    t[i, j] = tanh(t[i, j])\n  }\n",
               "t.tile:4: unknown function 'tanh'");
  expect_error("  alloc t: fragment f32[16, 8]\n  fill t, q\n", "line 3: unknown name 'q'");
  expect_error("  alloc t: fragment f32[16, 8]\n  reduce min t -> t axis=1\n", "unknown reduction");
}

TEST(TileVerify, BadLayouts) {
  // A tile the gemm reads as packed A panels cannot also be addressed element by element.
  expect_error(
      "  alloc a: scratch bf16[16, 32]\n  alloc b: scratch bf16[32, 32]\n  alloc c: fragment f32[16, 32]\n"
      "  gemm a, b -> c\n  alloc d: fragment f32[32, 32]\n  gemm b, b -> d\n",
      "line 7: bad layout: b is used as packed_a here but as packed_b at line 5");
  expect_error("  alloc a: scratch bf16[16, 32] layout=swizzled\n", "line 2: bad layout 'swizzled'");
  expect_error(
      "  alloc a: scratch f32[16, 32] layout=packed_a\n  parallel i, j in a {\n"
      "    a[i, j] = 1.0\n  }\n",
      "line 4: bad layout");
}

TEST(TileVerify, BoundsAndRanks) {
  expect_error("  alloc t: fragment f32[16, 8]\n  parallel i, j in t {\n    t[i, 8] = 1.0\n  }\n",
               "line 4: index 8 of t dim 1 is out of bounds [0, 8)");
  expect_error("  alloc t: fragment f32[16, 8]\n  copy A[bm] -> t\n", "line 3: tensor A has 2 dims");
  expect_error("  alloc t: fragment f32[16, 8]\n  parallel i in t {\n    t[i, 0] = 1.0\n  }\n", "line 3");
}

TEST(TileVerify, BuilderErrorsPointAtTheCppLine) {
  Builder b("k");
  Value m = b.dim("M");
  b.tensor("A", DType::f32, {m});
  b.grid({{"bx", m}});
  Handle x = b.fragment("x", DType::f32, {8, 8}), y = b.fragment("y", DType::f32, {8, 4});
  const int line = __LINE__ + 1;
  b.reduce_sum(x, y, 1);
  try {
    verify(b.finish());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line " + std::to_string(line) + ": reduce: y is [8, 4]"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sol::tile
