#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ops/isa_paths.h"
#include "sol/bench.h"
#include "sol/error.h"
#include "sol/registry.h"

namespace sol {
namespace {

TEST(Registry, BuiltinOpsAreRegisteredWithTables) {
  for (const char* name : {"copy", "cast"}) {
    const OpInfo& op = find_op(name);
    EXPECT_FALSE(op.bench_table.empty()) << name;
    EXPECT_FALSE(op.check_table.empty()) << name;
  }
}

// What `sol check` runs, on every ISA path this CPU has.
TEST(Registry, EveryCheckCasePassesOnEveryPath) {
  for (const OpInfo& op : registered_ops()) testing_paths::expect_registry_checks_pass(op.name);
}

// Every case's cost is one the floor accepts: its reads are a part of its bytes, and the
// memory-bound layer ops say how much they read (the floor's read term, roofline.h), so a
// read-heavy op (unpermute, routing) is not held to a copy rate its reads cannot reach.
TEST(Registry, CostsSplitTheirReads) {
  const std::set<std::string> reads_given = {"rmsnorm", "layernorm", "quant-fp8", "rope", "silu-mul", "gelu",
                                             "softmax", "moe-routing", "moe-permute", "embedding", "copy", "cast"};
  for (const OpInfo& op : registered_ops())
    for (const auto& given : op.check_table) {
      const Cost c = op.make(resolve_params(op, given), 0)->cost();
      EXPECT_GE(c.read_bytes, 0) << op.name;
      EXPECT_LE(c.read_bytes, c.bytes) << op.name;
      if (reads_given.count(op.name) && c.bytes > 0) {
        EXPECT_GT(c.read_bytes, 0) << op.name;
      }
    }
}

TEST(Registry, UnknownOpAndParametersAreNamed) {
  try {
    find_op("gemmm");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown op 'gemmm'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("copy"), std::string::npos);
  }
  EXPECT_THROW(resolve_params(find_op("copy"), {{"m", "3"}}), Error);
  OpParams p = resolve_params(find_op("copy"), {{"n", "12x"}});
  EXPECT_THROW(p.integer("n"), Error);
  EXPECT_THROW(resolve_params(find_op("cast"), {{"to", "f64"}}).dtype("to"), Error);
  EXPECT_THROW(find_op("cast").make(resolve_params(find_op("cast"), {{"to", "i32"}}), 0), Error);
}

TEST(Registry, SizesAcceptBinarySuffixes) {
  EXPECT_EQ(parse_size("16M", "n"), int64_t(16) << 20);
  EXPECT_EQ(parse_size("3K", "n"), 3072);
  EXPECT_EQ(parse_size("2G", "n"), int64_t(2) << 30);
  EXPECT_EQ(parse_size("17", "n"), 17);
  EXPECT_THROW(parse_size("-1", "n"), Error);
  EXPECT_THROW(parse_size("4T", "n"), Error);
  EXPECT_THROW(parse_size("99999999999G", "n"), Error);
  EXPECT_THROW(parse_size("", "n"), Error);
}

}  // namespace
}  // namespace sol
