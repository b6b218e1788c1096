// Pass golden tests, in the manner of Triton's lit tests: for each input under golden/ the IR
// after every pass is compared with golden/<case>.<pass>.tile. Regenerate with
// SOL_UPDATE_GOLDEN=1 after an intended change, and read the diff.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "sol/error.h"
#include "sol/tile.h"
#include "tile_test_util.h"

namespace sol::tile {
namespace {

using testing::golden_dir;
using testing::read_text;

// Splits a dump_after=all stream into pass name -> IR text.
std::map<std::string, std::string> dumps(const Program& p, const CpuTarget& cpu) {
  std::ostringstream os;
  CompileOptions opt;
  opt.cpu = cpu;  // the golden files hold one target's output, whatever this machine is
  opt.dump_after = {"all"};
  opt.dump = &os;
  lower(p, opt);
  std::map<std::string, std::string> out;
  std::istringstream in(os.str());
  std::string current, line;
  const std::string tag = "// -----// IR after ";
  while (std::getline(in, line)) {
    if (line.rfind(tag, 0) == 0) {
      current = line.substr(tag.size(), line.find(' ', tag.size()) - tag.size());
      continue;
    }
    out[current] += line + "\n";
  }
  return out;
}

void check_case(const std::string& name, CpuTarget cpu = {}) {
  const auto input = golden_dir() / (name + ".in.tile");
  const std::string text = read_text(input);
  ASSERT_FALSE(text.empty()) << input;
  const auto after = dumps(parse(text, input.string()), cpu);
  const bool update = std::getenv("SOL_UPDATE_GOLDEN") != nullptr;
  for (const std::string& pass : pass_names()) {
    const auto path = golden_dir() / (name + "." + pass + ".tile");
    if (update) std::ofstream(path) << after.at(pass);
    EXPECT_EQ(after.at(pass), read_text(path)) << "IR after " << pass << " differs from " << path;
    // Every stage is itself a valid program that prints back identically.
    EXPECT_EQ(print(parse(after.at(pass))), after.at(pass)) << pass;
  }
}

TEST(TilePasses, GemmGolden) { check_case("gemm_edges"); }
TEST(TilePasses, TransposedGemmGolden) { check_case("gemm_nt"); }
TEST(TilePasses, ElementwiseGolden) { check_case("rows"); }
TEST(TilePasses, LoopTilingGolden) { check_case("tiled"); }
TEST(TilePasses, ReuseGolden) { check_case("reuse"); }
// For cores whose tile kernels multiply bf16 by f32 FMAs: A widened, its last panel 6 rows.
TEST(TilePasses, WidenedGemmGolden) { check_case("gemm_widened", CpuTarget{.widen_bf16_a = true}); }

TEST(TilePasses, ReuseWrittenByHandIsNotTrusted) {
  // x is copied from Y, which the kernel writes: a hand-written `reuse` must not survive.
  const std::string text =
      "kernel k(Y: f32[N, 16]) grid(b = ceildiv(N, 16)) {\n  alloc x: fragment f32[16, 16] reuse\n"
      "  copy Y[b * 16, 0] -> x reuse\n  copy x -> Y[b * 16, 0]\n}\n";
  EXPECT_EQ(print(lower(parse(text))).find("reuse"), std::string::npos);
}

TEST(TilePasses, TileMustBeAPositiveInteger) {
  for (const char* bad : {"tile=0", "tile", "tile=x"}) {
    const std::string text = std::string("kernel k(X: f32[N]) grid(b = 1) {\n  alloc t: fragment f32[4]\n  for i in 0 .. N ") +
                             bad + " {\n    fill t, 1.0\n  }\n}\n";
    EXPECT_THROW(lower(parse(text)), Error) << bad;
  }
}

TEST(TilePasses, UnrollNeedsConstantBounds) {
  const std::string text =
      "kernel k(X: f32[N]) grid(b = 1) {\n  alloc t: fragment f32[4]\n  for i in 0 .. N unroll {\n"
      "    fill t, 1.0\n  }\n}\n";
  EXPECT_THROW(lower(parse(text)), Error);
}

TEST(TilePasses, ScratchIsReusedAcrossDisjointLifetimes) {
  const std::string text =
      "kernel k(X: f32[N, 64]) grid(b = 1) {\n"
      "  alloc t: fragment f32[64, 64]\n  copy X[0, 0] -> t\n  copy t -> X[0, 0]\n"
      "  alloc u: fragment f32[64, 64]\n  copy X[64, 0] -> u\n  copy u -> X[64, 0]\n}\n";
  const Program p = lower(parse(text));
  EXPECT_EQ(p.attrs.at("arena"), "16384");
  EXPECT_EQ(p.alloc("u")->attrs.at("offset"), "0");
}

TEST(TilePasses, DumpAfterRejectsUnknownPass) {
  CompileOptions opt;
  opt.dump_after = {"no-such-pass"};
  EXPECT_THROW(lower(parse("kernel k(X: f32[N]) grid(b = 1) {\n}\n"), opt), Error);
}

}  // namespace
}  // namespace sol::tile
