// The GEMM floor (Cost::compute) is the best unit the machine has for the dtype, whichever
// kernel runs: the AMX tiles wherever the ISA level in force has them (decode included, and on
// the tile model when tests force it), else the vector dot products; f32 is always FMA.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ops/gemm/problem.h"
#include "ops/isa_paths.h"
#include "sol/hw.h"
#include "sol/registry.h"

namespace sol {
namespace {

Unit gemm_unit(const std::string& m, const std::string& dtype) {
  const OpInfo& op = find_op("gemm");
  const std::map<std::string, std::string> given = {
      {"m", m}, {"n", "64"}, {"k", "128"}, {"dtype", dtype}, {"layout", "nt"}, {"packed", "1"}};
  return op.make(resolve_params(op, given), 0)->cost().compute;
}

Unit grouped_unit(const std::string& rows) {
  const OpInfo& op = find_op("gemm-grouped");
  return op.make(resolve_params(op, {{"rows", rows}, {"n", "64"}, {"k", "128"}}), 0)->cost().compute;
}

void expect_units(bool amx) {
  for (const char* m : {"1", "16", "17", "128"}) {
    SCOPED_TRACE(std::string("m = ") + m);
    EXPECT_EQ(gemm_unit(m, "bf16"), amx ? Unit::amx_bf16 : Unit::dot_bf16);
    EXPECT_EQ(gemm_unit(m, "fp8"), amx ? Unit::amx_bf16 : Unit::dot_bf16);
    EXPECT_EQ(gemm_unit(m, "s8"), amx ? Unit::amx_int8 : Unit::dot_s8);
    EXPECT_EQ(gemm_unit(m, "f32"), Unit::fma_f32);
  }
  for (const char* rows : {"1,2,0,3", "40,17,64"}) {
    SCOPED_TRACE(std::string("rows = ") + rows);
    EXPECT_EQ(grouped_unit(rows), amx ? Unit::amx_bf16 : Unit::dot_bf16);
  }
}

TEST(GemmFloorUnit, BestUnitOfTheLevelAtAnyM) {
  testing_paths::for_each_isa([] { expect_units(active_isa() >= Isa::amx); });
}

TEST(GemmFloorUnit, TheForcedTileModelCountsAsAmx) {
  if (cpu_features().best_isa < Isa::avx512) GTEST_SKIP() << "no AVX-512: the tile model does not run here";
  setenv("SOL_ISA", "avx512", 1);
  gemm_detail::force_amx_model(true);
  expect_units(true);
  gemm_detail::force_amx_model(false);
  expect_units(false);
  unsetenv("SOL_ISA");
}

}  // namespace
}  // namespace sol
