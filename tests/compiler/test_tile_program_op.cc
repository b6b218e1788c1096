// The `tile-program` op (sol bench of any .tile file): its cost model, its check against the
// interpreter, and its errors for a missing file or a missing or unknown dim.
#include <gtest/gtest.h>

#include <fstream>

#include "sol/error.h"
#include "sol/registry.h"
#include "tile_test_util.h"

namespace sol {
namespace {

using tile::testing::source_root;
using tile::testing::test_cache_dir;

std::unique_ptr<OpCase> make(const std::string& file, const std::string& dims) {
  const OpInfo& op = find_op("tile-program");
  return op.make(resolve_params(op, {{"file", file}, {"dims", dims}}), 0);
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  return at == std::string::npos ? text : text.substr(0, at) + to + text.substr(at + from.size());
}

std::string example_path(const char* name) { return (source_root() / "examples/tile" / name).string(); }

TEST(TileProgramOp, GemmCostIsTheProgramsGemmWork) {
  test_cache_dir();
  auto c = make(example_path("gemm_bf16.tile"), "M=192,N=384,K=2048");
  // One cell, two K blocks of 192 x 384 x 1024.
  EXPECT_DOUBLE_EQ(c->cost().flops, 2.0 * 192 * 384 * 2048);
  EXPECT_DOUBLE_EQ(c->cost().bytes, 2.0 * 192 * 2048 + 2.0 * 2048 * 384 + 4.0 * 192 * 384);
  EXPECT_EQ(c->cost().compute, Unit::dot_bf16);
  EXPECT_EQ(c->shape(), "gemm_bf16,M=192,K=2048,N=384");
  // Ragged: the padding of the edge tiles is not work (the kernel skips it).
  EXPECT_DOUBLE_EQ(make(example_path("gemm_bf16.tile"), "M=70,N=500,K=1100")->cost().flops, 2.0 * 70 * 500 * 1100);
}

// A program in a temporary file, removed at the end of the scope.
struct TempTile {
  std::string path;
  TempTile(const std::string& name, const std::string& text)
      : path((std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".tile")).string()) {
    std::ofstream(path) << text;
  }
  ~TempTile() { std::remove(path.c_str()); }
};

// A loop whose body never names its variable is counted in closed form: 10^12 trips would take
// hours one at a time. Its first trip reads a_s as copied before the loop (all 64 rows); every
// later trip reads it as the copy at the trip's end left it (40 rows of A). The trip count is
// the product of two dims (of unused tensors), so one compiled kernel serves every count.
TEST(TileProgramOp, LoopWithoutItsVariableIsCountedInClosedForm) {
  test_cache_dir();
  const std::string text = R"(kernel repeat(A: bf16[40, 64], B: bf16[64, 64], C: f32[64, 64], S: f32[T], U: f32[V]) grid(g = 1) {
  alloc a_s: scratch bf16[64, 64]
  alloc b_s: scratch bf16[64, 64]
  alloc acc: fragment f32[64, 64]
  fill acc, 0
  copy B[0, 0] -> a_s
  copy B[0, 0] -> b_s
  for r in 0 .. T * V {
    gemm a_s, b_s -> acc
    copy A[0, 0] -> a_s
  }
  copy acc -> C[0, 0]
}
)";
  const double one = 2.0 * 64 * 64 * 64, ragged = 2.0 * 40 * 64 * 64;
  TempTile file("sol-test-repeat", text);
  for (const auto& [t, v] : {std::pair{1, 1}, {1, 2}, {1, 3}, {1, 7}, {1000000, 1000000}}) {
    const double trips = double(t) * double(v);
    EXPECT_DOUBLE_EQ(make(file.path, "T=" + std::to_string(t) + ",V=" + std::to_string(v))->cost().flops,
                     one + (trips - 1) * ragged)
        << trips << " trips";
  }
  // The same loop naming its variable is walked trip by trip: the copy at the end of trip r
  // reads A (now 100 rows) from row 40 r, so the gemms of trips 1 and 2 see 64 and 60 rows.
  TempTile moving("sol-test-moving", replaced(replaced(text, "bf16[40, 64]", "bf16[100, 64]"), "copy A[0, 0]", "copy A[r * 40, 0]"));
  EXPECT_DOUBLE_EQ(make(moving.path, "T=1,V=3")->cost().flops, one + 2.0 * 64 * 64 * 64 + 2.0 * 60 * 64 * 64);
}

TEST(TileProgramOp, CheckRunsTheInterpreter) {
  test_cache_dir();
  auto c = make(example_path("softmax_rows.tile"), "R=37");
  EXPECT_EQ(c->cost().flops, 0.0);  // no gemm: memory-bound by its bytes
  const CheckResult r = c->check();
  EXPECT_TRUE(r.pass) << r.error << " " << r.detail;
}

TEST(TileProgramOp, BadArgumentsAreErrors) {
  test_cache_dir();
  auto message = [](const std::string& file, const std::string& dims) {
    try {
      make(file, dims);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("", "").find("--file"), std::string::npos);
  EXPECT_NE(message("/no/such.tile", "").find("cannot read"), std::string::npos);
  EXPECT_NE(message(example_path("gemm_bf16.tile"), "M=64,N=64").find("give dim K"), std::string::npos);
  EXPECT_NE(message(example_path("gemm_bf16.tile"), "M=64,N=64,K=64,Q=3").find("--dims names Q"), std::string::npos);
  EXPECT_NE(message(example_path("gemm_bf16.tile"), "M64").find("NAME=VALUE"), std::string::npos);
}

}  // namespace
}  // namespace sol
