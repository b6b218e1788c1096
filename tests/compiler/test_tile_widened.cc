// Generated kernels with bf16 A tiles widened to f32 (CpuTarget::widen_bf16_a: the tile kernels
// multiply bf16 by f32 FMAs, as sol::gemm does at avx2 and on AVX-512 cores whose FMA pipes
// outrun their bf16 dot product). The widened kernel at the avx2 level and at the CPU's best
// must give the bits of the same program with bf16 pairs at the avx2 level, whose tile kernel
// sums the same products in the same order: any slip in the widened packing (pair order, the
// short last panel, a transposed A, an f32 A rounded to bf16) or in the panel offsets shows as
// a mismatch. Forced on every CPU with AVX2.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "hw/kernel_select.h"
#include "kernels/gemm.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/tile.h"
#include "tile_test_util.h"

namespace sol::tile {
namespace {

using testing::example;
using testing::golden_input;
using testing::random_buffer;
using testing::test_cache_dir;


// SOL_ISA for a scope.
class Level {
 public:
  explicit Level(const char* isa) { setenv("SOL_ISA", isa, 1); }
  ~Level() { unsetenv("SOL_ISA"); }
};

// Runs `p` compiled with or without widening at level `isa` on copies of `inputs` (outputs poisoned first).
std::vector<Buffer> run(const Program& p, bool widen, const char* isa, const std::vector<const Buffer*>& inputs,
                        const std::vector<size_t>& outputs) {
  test_cache_dir();
  Level level(isa);
  CompileOptions opt;
  opt.cpu = CpuTarget{.widen_bf16_a = widen};
  auto kernel = compile(p, opt);
  bool has_widened = false;
  for (const Stmt& s : kernel->program().body) has_widened = has_widened || s.has("widened");
  EXPECT_EQ(has_widened, widen) << p.name;
  std::vector<Buffer> bufs;
  std::vector<Tensor> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor t = *inputs[i];
    bufs.emplace_back(t.dtype(), t.shape());
    const bool poisoned = std::find(outputs.begin(), outputs.end(), i) != outputs.end();
    if (poisoned) std::memset(bufs.back().data(), 0xff, size_t(t.nbytes()));
    else std::memcpy(bufs.back().data(), t.data(), size_t(t.nbytes()));
  }
  for (Buffer& b : bufs) args.push_back(b);
  (*kernel)(args);
  return bufs;
}

// The widened kernel (at avx2, and at the CPU's best level) against bf16 pairs (avx2): bitwise;
// and against the interpreter.
void expect_widened_matches(const Program& p, const std::vector<const Buffer*>& inputs,
                            const std::vector<size_t>& outputs, double tol) {
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no AVX2: no tile kernel reads widened A";
  // At the CPU's best level (amx where it has one: its generated code calls the vector tiles).
  const std::string best(isa_name(cpu_features().best_isa));
  const std::vector<Buffer> widened = run(p, true, best.c_str(), inputs, outputs);
  const std::vector<Buffer> widened_avx2 = run(p, true, "avx2", inputs, outputs);
  const std::vector<Buffer> pairs = run(p, false, "avx2", inputs, outputs);
  std::vector<Buffer> ref;
  std::vector<Tensor> ref_t;
  for (const Buffer* b : inputs) {
    ref.emplace_back(b->tensor().dtype(), b->tensor().shape());
    std::memcpy(ref.back().data(), b->data(), size_t(b->tensor().nbytes()));
  }
  for (Buffer& b : ref) ref_t.push_back(b);
  interpret(p, ref_t);
  for (size_t o : outputs) {
    const int64_t bytes = widened[o].tensor().nbytes();
    EXPECT_EQ(std::memcmp(widened[o].data(), pairs[o].data(), size_t(bytes)), 0)
        << p.name << " output " << o << ": widened A at " << best << " differs from bf16 pairs at avx2";
    EXPECT_EQ(std::memcmp(widened_avx2[o].data(), pairs[o].data(), size_t(bytes)), 0)
        << p.name << " output " << o << ": widened A at avx2 differs from bf16 pairs at avx2";
    const CheckResult r = compare_relative(widened[o], ref[o], tol);
    EXPECT_TRUE(r.pass) << p.name << " output " << o << ": error " << r.error << " " << r.detail;
  }
}


TEST(TileWidened, GemmWithShortLastPanelAndOddK) {
  // 30-row A tiles (two panels of 12, one of 6), K blocks of 18 with K = 53 (a last block of
  // 17: an odd pair), M and N ragged.
  Buffer a = random_buffer(DType::bf16, {67, 53}, 1), b = random_buffer(DType::bf16, {53, 83}, 2), c(DType::f32, {67, 83});
  expect_widened_matches(golden_input("gemm_widened"), {&a, &b, &c}, {2}, 1e-5);
}

TEST(TileWidened, LargeGemmTakesTheVectorPacking) {
  // K blocks of 1024 (the 16-step transposing path), M = 200: a last panel of 8 rows.
  Buffer a = random_buffer(DType::bf16, {200, 1100}, 3), b = random_buffer(DType::bf16, {1100, 70}, 4), c(DType::f32, {200, 70});
  expect_widened_matches(example("gemm_bf16.tile"), {&a, &b, &c}, {2}, 1e-5);
}

TEST(TileWidened, TransposedA) {
  // A stored [K, M] (packed_at): each step's values are runs of two source rows.
  Buffer a = random_buffer(DType::bf16, {131, 50}, 5), b = random_buffer(DType::bf16, {70, 131}, 6), c(DType::f32, {50, 70});
  expect_widened_matches(golden_input("gemm_nt"), {&a, &b, &c}, {2}, 1e-5);
}

TEST(TileWidened, FlashAttentionRoundsItsF32ProbabilitiesFirst) {
  // P is an f32 tile copied into a bf16 A tile: rounded to bf16, then widened.
  constexpr int64_t b = 1, h = 2, sq = 100, skv = 150, d = 128;
  Buffer q = random_buffer(DType::bf16, {b, h, sq, d}, 7), k = random_buffer(DType::bf16, {b, h, skv, d}, 8),
         v = random_buffer(DType::bf16, {b, h, skv, d}, 9);
  Buffer o(DType::bf16, {b, h, sq, d}), lse(DType::f32, {b, h, sq});
  expect_widened_matches(example("flash_attention.tile"), {&q, &k, &v, &o, &lse}, {3, 4}, 2e-2);
}

TEST(TileWidened, WidenedKernelRunsAtAnotherLevel) {
  // Compiled at the CPU's best level, launched at avx2: the tile kernels are the launch level's,
  // and both levels have one that reads widened A, with the same bits.
  if (cpu_features().best_isa < Isa::avx2) GTEST_SKIP() << "no AVX2";
  test_cache_dir();
  CompileOptions opt;
  opt.cpu = CpuTarget{.widen_bf16_a = true};
  std::shared_ptr<const Kernel> kernel = compile(golden_input("gemm_widened"), opt);
  Buffer a = random_buffer(DType::bf16, {30, 18}, 10), bm = random_buffer(DType::bf16, {18, 40}, 11);
  Buffer c_best(DType::f32, {30, 40}), c_avx2(DType::f32, {30, 40});
  (*kernel)({a, bm, c_best});
  {
    Level level("avx2");
    (*kernel)({a, bm, c_avx2});
  }
  EXPECT_EQ(std::memcmp(c_best.data(), c_avx2.data(), size_t(c_best.tensor().nbytes())), 0);
}

TEST(TileWidened, OnlyABf16APanelIsWidened) {
  const std::string f32_tile =
      "kernel k(A: f32[M, K]) grid(b = 1) {\n  alloc a_s: scratch f32[12, 8] layout=packed_a widened\n}\n";
  EXPECT_THROW(verify(parse(f32_tile)), Error);
  const std::string b_panel =
      "kernel k(A: bf16[M, K]) grid(b = 1) {\n  alloc b_s: scratch bf16[8, 32] layout=packed_b widened\n}\n";
  EXPECT_THROW(verify(parse(b_panel)), Error);
}

TEST(TileWidened, DefaultTargetFollowsTheCoresBf16Route) {
  // Widened A at avx2 (no bf16 dot product: sol::gemm's set there reads widened A, whatever the
  // core), and where the core prefers FMAs for bf16 (or a test forces the trait) at avx512 and
  // above (at avx512 exactly where sol::gemm takes its FMA set).
  if (cpu_features().best_isa >= Isa::avx2) {
    Level level("avx2");
    EXPECT_TRUE(cpu_target_here().widen_bf16_a);
    EXPECT_NE(select_kernels(kernels::gemm_kernel_table(), "gemm").pack_a_panel_f32_pairs, nullptr);
    const uint32_t masked = mask_kernel_needs(kPrefersFmaBf16);
    EXPECT_TRUE(cpu_target_here().widen_bf16_a);
    mask_kernel_needs(masked);
  }
  for (Isa isa : {Isa::avx512, Isa::amx}) {
    if (cpu_features().best_isa < isa) continue;
    Level level(std::string(isa_name(isa)).c_str());
    const bool trait = (kernel_needs_met() & kPrefersFmaBf16) != 0;
    EXPECT_EQ(cpu_target_here().widen_bf16_a, trait) << isa_name(isa);
    if (isa == Isa::avx512) {
      EXPECT_EQ(trait, select_kernels(kernels::gemm_kernel_table(), "gemm").pack_a_panel_f32_pairs != nullptr);
    }
    const uint32_t before = force_kernel_traits(kPrefersFmaBf16);
    EXPECT_TRUE(cpu_target_here().widen_bf16_a) << isa_name(isa);
    const uint32_t masked = mask_kernel_needs(kPrefersFmaBf16);
    EXPECT_FALSE(cpu_target_here().widen_bf16_a) << isa_name(isa);
    mask_kernel_needs(masked);
    force_kernel_traits(before);
  }
}

}  // namespace
}  // namespace sol::tile
