// The sm90 GEMM configuration chooser (sm90_gemm_config.h): every shape of the GEMM shape table
// gets a configuration that passes every budget, for each kernel kind; broken budgets are
// errors naming the budget; the model's choices follow from its stated terms.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <nlohmann/json.hpp>

#include "kernels/cuda/sm90/sm90_gemm_config.h"
#include "model/model_files.h"
#include "ops/error_message.h"

namespace sol::kernels::sm90 {
namespace {

using testing_errors::message_of;

struct NamedProblem {
  std::string name;
  GemmProblem problem;
};

std::vector<NamedProblem> shape_table(GemmKernelKind kind) {
  std::ifstream in(sol::test::repository_root() / "bench" / "gemm_shapes.json");
  EXPECT_TRUE(in.good()) << "bench/gemm_shapes.json not found";
  const nlohmann::json j = nlohmann::json::parse(in);
  std::vector<NamedProblem> out;
  for (const auto& s : j.at("shapes")) {
    NamedProblem p;
    p.name = s.at("name").get<std::string>();
    p.problem.n = s.at("n").get<std::int64_t>();
    p.problem.k = s.at("k").get<std::int64_t>();
    p.problem.kind = kind;
    // bf16 reads a layout-nn B [k, n] MN-major; fp8 wgmma cannot, so those shapes are planned as nt.
    if (kind == GemmKernelKind::bf16 && s.value("layout", "nt") == "nn") p.problem.b_major = OperandMajor::mn;
    if (s.contains("group_m"))
      p.problem.group_m = s.at("group_m").get<std::vector<std::int64_t>>();
    else
      p.problem.group_m = {s.at("m").get<std::int64_t>()};
    out.push_back(p);
  }
  return out;
}

constexpr GemmKernelKind kKinds[] = {GemmKernelKind::bf16, GemmKernelKind::e4m3, GemmKernelKind::e4m3_block_scaled};

TEST(Sm90GemmConfig, EveryShapeOfTheTableGetsAValidConfiguration) {
  const Sm90Target t = Sm90Target::h200();
  int shapes = 0;
  for (GemmKernelKind kind : kKinds) {
    for (const NamedProblem& p : shape_table(kind)) {
      SCOPED_TRACE(p.name + " " + kernel_kind_name(kind));
      Sm90GemmConfig c;
      ASSERT_EQ(message_of([&] { c = choose_config(p.problem, t); }), "(no error)");
      EXPECT_EQ(message_of([&] { check_config(c, p.problem, t); }), "(no error)");
      EXPECT_GE(c.predicted_us, c.floor_us * (1 - 1e-12)) << "the model beat the floor";
      if (kind == GemmKernelKind::e4m3_block_scaled) {
        EXPECT_EQ(c.block_n, 128u);
      }
      ++shapes;
    }
  }
  EXPECT_GE(shapes, 3 * 30);
}

// The table printed, for docs/perf/gpu.md (ctest shows it with --verbose).
TEST(Sm90GemmConfig, PrintsTheChosenTable) {
  const Sm90Target t = Sm90Target::h200();
  for (GemmKernelKind kind : {GemmKernelKind::bf16, GemmKernelKind::e4m3_block_scaled})
    for (const NamedProblem& p : shape_table(kind)) {
      const Sm90GemmConfig c = choose_config(p.problem, t);
      std::printf("%-26s %-17s %3ux%-3u st%u split%-2u tiles %5lld waves %3lld  model %8.1f us  floor %8.1f us (%3.0f%%)\n",
                  p.name.c_str(), kernel_kind_name(kind), c.block_m, c.block_n, c.stages, c.split_k,
                  static_cast<long long>(c.tiles), static_cast<long long>(c.waves), c.predicted_us, c.floor_us,
                  100 * c.floor_us / c.predicted_us);
    }
}

TEST(Sm90GemmConfig, SmallShapesSplitKAndLargeShapesUseWideTiles) {
  const Sm90Target t = Sm90Target::h200();
  // Decode: 1 row, n = 2112 gives 33 tiles of 64 columns on 132 SMs; K = 7168 has 112 blocks,
  // so splitting K fills the SMs that would idle.
  const Sm90GemmConfig decode = choose_config({{1}, 2112, 7168, GemmKernelKind::bf16, 2}, t);
  EXPECT_EQ(decode.block_m, 64u);
  EXPECT_GT(decode.split_k, 1u);
  // Prefill: 4096 x 7168 x 16384 is compute-bound; the widest tiles cost the least operand traffic.
  const Sm90GemmConfig big = choose_config({{4096}, 7168, 16384, GemmKernelKind::bf16, 2}, t);
  EXPECT_EQ(big.block_m, 128u);
  EXPECT_EQ(big.split_k, 1u);
  EXPECT_GE(big.block_n, 128u);
  EXPECT_EQ(big.stages, ring_smem_bytes(GemmKernelKind::bf16, 128, big.block_n, big.stages + 1) > t.smem_per_block
                            ? big.stages
                            : kMaxStages);
  // A short K never gets more stages than it has blocks (beyond the minimum of two).
  const Sm90GemmConfig short_k = choose_config({{256}, 256, 128, GemmKernelKind::bf16, 2}, t);
  EXPECT_EQ(short_k.stages, kMinStages);
  EXPECT_EQ(short_k.split_k, 1u);
}

TEST(Sm90GemmConfig, BrokenBudgetsAreNamed) {
  const Sm90Target t = Sm90Target::h200();
  const GemmProblem p{{4096}, 7168, 2048, GemmKernelKind::e4m3_block_scaled, 2};
  const Sm90GemmConfig good = choose_config(p, t);
  Sm90GemmConfig c = good;
  c.block_n = 256;
  EXPECT_NE(message_of([&] { check_config(c, p, t); }).find("scale block"), std::string::npos);
  c = good;
  c.stages = 12;
  c.smem_bytes = ring_smem_bytes(p.kind, c.block_m, c.block_n, c.stages);
  EXPECT_NE(message_of([&] { check_config(c, p, t); }).find("stages = 12"), std::string::npos);
  c = good;
  c.stages = 8;
  c.block_m = 128;
  c.consumers = 2;
  c.threads = 384;
  c.smem_bytes = ring_smem_bytes(p.kind, 128, 128, 8);
  EXPECT_NE(message_of([&] { check_config(c, p, t); }).find("exceeds the device"), std::string::npos);
  c = good;
  c.consumer_regs_needed = 300;
  EXPECT_NE(message_of([&] { check_config(c, p, t); }).find("registers"), std::string::npos);
  c = good;
  c.split_k = 100;
  EXPECT_NE(message_of([&] { check_config(c, p, t); }).find("split_k = 100"), std::string::npos);
  // A row stride TMA cannot take: K = 100 bf16 is 200 bytes, not a multiple of 16.
  const GemmProblem odd{{64}, 64, 100, GemmKernelKind::bf16, 2};
  EXPECT_NE(message_of([&] { choose_config(odd, t); }).find("multiple of 16"), std::string::npos);
  EXPECT_NE(message_of([&] { choose_config({{64}, 68, 64, GemmKernelKind::bf16, 2}, t); }).find("multiple of 8"),
            std::string::npos);
  EXPECT_NE(message_of([&] { choose_config({{}, 64, 64, GemmKernelKind::bf16, 2}, t); }).find("no groups"),
            std::string::npos);
  EXPECT_NE(message_of([&] { choose_config({{-1}, 64, 64, GemmKernelKind::bf16, 2}, t); }).find("-1 rows"),
            std::string::npos);
}

// A named configuration ($SOL_SM90_GEMM_CONFIG) runs as named, with the chooser's stages for its
// tile unless it names them, and passes the same budgets; a malformed or unfitting one is an
// error naming the spec.
TEST(Sm90GemmConfig, ForcedConfigurationsRunAsNamedOrAreRefused) {
  const Sm90Target t = Sm90Target::h200();
  const GemmProblem p{{4096}, 7168, 2048, GemmKernelKind::bf16, 2};
  const Sm90GemmConfig c = forced_config(p, t, "128x128:s4:k2");
  EXPECT_EQ(c.block_m, 128u);
  EXPECT_EQ(c.block_n, 128u);
  EXPECT_EQ(c.stages, 4u);
  EXPECT_EQ(c.split_k, 2u);
  EXPECT_EQ(c.consumers, 2u);
  EXPECT_EQ(c.tiles, 32 * 56 * 2);
  EXPECT_EQ(message_of([&] { check_config(c, p, t); }), "(no error)");
  // The chooser's own pick, named: the same configuration and model time.
  const Sm90GemmConfig chosen = choose_config(p, t);
  const std::string spec = std::to_string(chosen.block_m) + "x" + std::to_string(chosen.block_n);
  const Sm90GemmConfig named = forced_config(p, t, spec);
  EXPECT_EQ(named.stages, chosen.stages);
  EXPECT_EQ(named.split_k, chosen.split_k);
  EXPECT_EQ(named.smem_bytes, chosen.smem_bytes);
  EXPECT_DOUBLE_EQ(named.predicted_us, chosen.predicted_us);
  // One consumer for 64-row tiles; stages clamp to K's blocks unless named.
  const Sm90GemmConfig narrow = forced_config({{1}, 7168, 128, GemmKernelKind::bf16, 2}, t, "64x128");
  EXPECT_EQ(narrow.consumers, 1u);
  EXPECT_EQ(narrow.threads, 256u);
  EXPECT_EQ(narrow.stages, kMinStages);
  EXPECT_EQ(forced_config({{1}, 7168, 128, GemmKernelKind::bf16, 2}, t, "64x128:s8").stages, 8u);
  for (const char* bad : {"", "128", "128x", "x128", "128x128:", "128x128:q3", "128x128:s", "128x128s4", "12ax128"})
    EXPECT_NE(message_of([&] { forced_config(p, t, bad); }).find("is not BMxBN"), std::string::npos) << bad;
  const auto refused = [&](const GemmProblem& q, const char* spec, const char* why) {
    const std::string m = message_of([&] { forced_config(q, t, spec); });
    EXPECT_NE(m.find(std::string("config '") + spec + "' does not fit"), std::string::npos) << m;
    EXPECT_NE(m.find(why), std::string::npos) << m;
  };
  refused({{4096}, 7168, 2048, GemmKernelKind::e4m3_block_scaled, 2}, "128x256", "scale block");
  refused(p, "96x128", "consumers");
  refused(p, "128x96", "wgmma N");
  refused(p, "128x256:s6", "exceeds the device");
  refused(p, "128x128:k64", "split_k = 64");
}

// B multicast (":c2"): named, it runs where its rules hold (one GEMM, K-major B, an even count
// of row tiles) and is refused by name elsewhere; the chooser considers it only where the target
// allows (Sm90Target::unproven), and then its model halves B's L2 traffic.
TEST(Sm90GemmConfig, MulticastIsNamedOrAllowedAndKeepsItsRules) {
  Sm90Target t = Sm90Target::h200();
  const GemmProblem fp8{{4096}, 7168, 2048, GemmKernelKind::e4m3_block_scaled, 2};
  const Sm90GemmConfig c = forced_config(fp8, t, "128x128:c2");
  EXPECT_EQ(c.cluster_m, 2u);
  EXPECT_EQ(message_of([&] { check_config(c, fp8, t); }), "(no error)");
  const Sm90GemmConfig one = forced_config(fp8, t, "128x128");
  EXPECT_EQ(one.cluster_m, 1u);
  EXPECT_EQ(one.tiles, c.tiles);
  EXPECT_LE(c.predicted_us, one.predicted_us);
  const auto refused = [&](const GemmProblem& q, const char* spec, const char* why) {
    const std::string m = message_of([&] { forced_config(q, t, spec); });
    EXPECT_NE(m.find(why), std::string::npos) << spec << ": " << m;
  };
  refused({{128, 128}, 7168, 2048, GemmKernelKind::bf16, 2}, "128x128:c2", "is for one GEMM");
  GemmProblem one_group{{4096}, 7168, 2048, GemmKernelKind::bf16, 2};
  one_group.grouped = true;  // a grouped layout of one group may still skip tiles on the device
  refused(one_group, "128x128:c2", "is for one GEMM");
  refused({{384}, 7168, 2048, GemmKernelKind::bf16, 2}, "128x128:c2", "3 row tiles");
  refused({{4096}, 7168, 2048, GemmKernelKind::bf16, 2, OperandMajor::mn}, "128x128:c2", "not split");
  refused(fp8, "128x128:c4", "at most 2");
  EXPECT_NE(message_of([&] { forced_config(fp8, t, "128x128:c"); }).find("is not BMxBN"), std::string::npos);
  // The chooser: never a cluster unless allowed. Allowed, a cluster wins only where the model
  // says L2 binds (with the default L2 placeholder the per-SM term binds first, so ties keep one
  // CTA); on a target with a quarter of that L2 bandwidth the fp8 shape takes one.
  for (const GemmKernelKind kind : kKinds)
    for (const NamedProblem& p : shape_table(kind)) EXPECT_EQ(choose_config(p.problem, t).cluster_m, 1u) << p.name;
  t.unproven = true;
  EXPECT_EQ(choose_config(fp8, t).cluster_m, 1u);
  Sm90Target starved_grouped = t;
  starved_grouped.l2_gb_s = t.l2_gb_s / 4;
  GemmProblem fp8_grouped = fp8;
  fp8_grouped.grouped = true;
  EXPECT_EQ(choose_config(fp8_grouped, starved_grouped).cluster_m, 1u);
  Sm90Target starved = t;
  starved.l2_gb_s = t.l2_gb_s / 4;
  const Sm90GemmConfig picked = choose_config(fp8, starved);
  EXPECT_EQ(picked.cluster_m, 2u);
  Sm90Target starved_one = starved;
  starved_one.unproven = false;
  EXPECT_LT(picked.predicted_us, choose_config(fp8, starved_one).predicted_us);
  for (const GemmKernelKind kind : kKinds)
    for (const NamedProblem& p : shape_table(kind)) {
      const Sm90GemmConfig any = choose_config(p.problem, t);
      EXPECT_EQ(message_of([&] { check_config(any, p.problem, t); }), "(no error)") << p.name;
    }
}

// The block-scaled 128 x 192 tile (two scale blocks a tile, 192 + 40 registers a consumer
// thread): named it runs, only for the block-scaled kernel; the chooser takes it only where the
// target allows unproven configurations, and then at the fp8 4096-row shapes, where the model's
// per-SM operand term binds (17% fewer bytes per FLOP than 128 x 128).
TEST(Sm90GemmConfig, Fp8TileOfTwoScaleBlocksIsNamedOrAllowed) {
  Sm90Target t = Sm90Target::h200();
  const GemmProblem fp8{{4096}, 7168, 2048, GemmKernelKind::e4m3_block_scaled, 2};
  const Sm90GemmConfig c = forced_config(fp8, t, "128x192");
  EXPECT_EQ(c.block_n, 192u);
  EXPECT_EQ(c.consumer_regs_needed, 232u);
  EXPECT_EQ(c.tiles, 32 * 38);
  EXPECT_EQ(message_of([&] { check_config(c, fp8, t); }), "(no error)");
  EXPECT_EQ(forced_config(fp8, t, "128x192:c2").cluster_m, 2u);
  const auto refused = [&](const GemmProblem& q, const char* spec, const char* why) {
    const std::string m = message_of([&] { forced_config(q, t, spec); });
    EXPECT_NE(m.find(why), std::string::npos) << spec << ": " << m;
  };
  refused({{4096}, 7168, 2048, GemmKernelKind::bf16, 2}, "128x192", "192: the block-scaled kernel only");
  refused({{4096}, 7168, 2048, GemmKernelKind::e4m3, 2}, "128x192", "192: the block-scaled kernel only");
  refused(fp8, "64x192", "with block_m 128");
  EXPECT_EQ(choose_config(fp8, t).block_n, 128u);
  t.unproven = true;
  const Sm90GemmConfig picked = choose_config(fp8, t);
  EXPECT_EQ(picked.block_n, 192u);
  EXPECT_LT(picked.predicted_us, choose_config(fp8, Sm90Target::h200()).predicted_us);
}

// A block-scaled kernel keeps two accumulator sets: 256 columns would need 296 registers, so its
// widths are its scale block and 192; bf16 may go to 256.
TEST(Sm90GemmConfig, RegisterModelSeparatesTheKinds) {
  EXPECT_GT(consumer_regs_needed(GemmKernelKind::e4m3_block_scaled, 256), 232u);
  EXPECT_LE(consumer_regs_needed(GemmKernelKind::e4m3_block_scaled, 128), 232u);
  EXPECT_LE(consumer_regs_needed(GemmKernelKind::e4m3_block_scaled, 192), 232u);
  EXPECT_LE(consumer_regs_needed(GemmKernelKind::bf16, 256), 232u);
}

// Empty experts cost nothing: a grouped shape whose groups are all empty but one plans like
// that one GEMM.
TEST(Sm90GemmConfig, EmptyGroupsAddNoTiles) {
  const Sm90Target t = Sm90Target::h200();
  const Sm90GemmConfig one = choose_config({{512}, 4096, 7168, GemmKernelKind::bf16, 2}, t);
  const Sm90GemmConfig grouped = choose_config({{0, 512, 0, 0}, 4096, 7168, GemmKernelKind::bf16, 2}, t);
  EXPECT_EQ(one.tiles, grouped.tiles);
  EXPECT_EQ(one.block_n, grouped.block_n);
  EXPECT_DOUBLE_EQ(one.predicted_us, grouped.predicted_us);
}

}  // namespace
}  // namespace sol::kernels::sm90

namespace sol::kernels::sm90 {
namespace {

// The kernel symbol that instantiates a configuration in sm90_gemm_configs.cu.
std::string config_symbol(const GemmProblem& p, const Sm90GemmConfig& c) {
  const bool nn = p.b_major == OperandMajor::mn;
  const char* k = p.kind == GemmKernelKind::bf16 ? (nn ? "bf16_nn" : "bf16")
                  : p.kind == GemmKernelKind::e4m3 ? "e4m3"
                                                   : "e4m3_scaled";
  return "sol_sm90_gemm_cfg_" + std::string(k) + "_" + std::to_string(c.block_m) + "x" +
         std::to_string(c.block_n) + "_s" + std::to_string(c.stages);
}

// Every configuration the chooser picks for the shape table is a row of the SASS expectations
// of sm90_gemm_configs.cu, and the offline tiers require each row's kernel in the NVRTC and the
// nvcc cubin (built with warnings as errors): so each chosen configuration is known to compile.
TEST(Sm90GemmConfig, EveryChosenConfigurationIsInstantiatedForTheOfflineBuilds) {
  std::ifstream in(sol::test::repository_root() / "tests" / "kernels" / "cuda" / "sm90_gemm_configs.sass.txt");
  ASSERT_TRUE(in.good());
  const std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::set<std::string> missing;
  for (GemmKernelKind kind : kKinds)
    for (const NamedProblem& p : shape_table(kind)) {
      const std::string symbol = config_symbol(p.problem, choose_config(p.problem, Sm90Target::h200()));
      if (source.find("\n" + symbol + " ") == std::string::npos) missing.insert(symbol);
    }
  std::string list;
  for (const std::string& s : missing) list += " " + s;
  EXPECT_TRUE(missing.empty()) << "not in sm90_gemm_configs.cu and its .sass.txt:" << list;
}

}  // namespace
}  // namespace sol::kernels::sm90
