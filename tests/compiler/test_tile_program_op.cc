// The `tile-program` op (sol bench of any .tile file): its cost model, its check against the
// interpreter, and its errors for a missing file or a missing or unknown dim.
#include <gtest/gtest.h>

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
