// Compiled kernels against their own programs (the interpreter) on random inputs, the JIT
// cache (memory hit, disk hit, two processes racing for one kernel), and compiler errors.
// Each program is compiled once for the whole binary; timings are printed, and asserted only
// with generous bounds.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "compiler/jit/jit.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/error.h"
#include "sol/tile.h"
#include "tile_test_util.h"

namespace sol::tile {
namespace {

using testing::example;
using testing::golden_input;
using testing::random_buffer;
using testing::test_cache_dir;


// Runs the compiled kernel and the interpreter on the same random inputs; outputs (the params
// named in `outputs`) are poisoned first and compared by relative error norm.
void check_against_interpreter(const Program& p, const std::vector<Buffer>& inputs, const std::vector<size_t>& outputs,
                               double tol) {
  test_cache_dir();
  CompileInfo info;
  auto kernel = compile(p, {}, &info);
  std::printf("[ tile jit ] %s: %s in %.3f s\n", p.name.c_str(),
              info.memory_hit ? "memory hit" : info.disk_hit ? "disk hit" : "compiled", info.seconds);
  std::vector<Buffer> mine, ref;
  std::vector<Tensor> mine_t, ref_t;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    mine.emplace_back(t.dtype(), t.shape());
    ref.emplace_back(t.dtype(), t.shape());
    std::memcpy(mine.back().data(), t.data(), size_t(t.nbytes()));
    std::memcpy(ref.back().data(), t.data(), size_t(t.nbytes()));
    if (std::find(outputs.begin(), outputs.end(), i) != outputs.end()) {
      std::memset(mine.back().data(), 0xff, size_t(t.nbytes()));
      std::memset(ref.back().data(), 0, size_t(t.nbytes()));
    }
    mine_t.push_back(mine.back());
    ref_t.push_back(ref.back());
  }
  (*kernel)(mine_t);
  interpret(p, ref_t);
  for (size_t o : outputs) {
    const CheckResult r = compare_relative(mine[o], ref[o], tol);
    EXPECT_TRUE(r.pass) << p.name << " output " << o << ": error " << r.error << " " << r.detail;
  }
}


std::vector<Buffer> buffers(std::initializer_list<Buffer*> list) {
  std::vector<Buffer> out;
  for (Buffer* b : list) out.push_back(std::move(*b));
  return out;
}

TEST(TileJit, GemmBf16MatchesInterpreter) {
  // M = 450: three cells down M (the last ragged) share each B block, which reuse-tiles packs
  // once per thread; K = 1100: two K blocks, so the B tile alternates between two regions.
  for (auto [m, k, n] : {std::array<int64_t, 3>{450, 600, 290}, {200, 1100, 400}, {150, 600, 290}}) {
    Buffer a = random_buffer(DType::bf16, {m, k}, 1), b = random_buffer(DType::bf16, {k, n}, 2), c = random_buffer(DType::f32, {m, n}, 3);
    check_against_interpreter(example("gemm_bf16.tile"), buffers({&a, &b, &c}), {2}, 1e-5);
  }
}

TEST(TileJit, ReusedTilesMatchInterpreter) {
  // Every cell copies W[0, 0] into the reused tile w: each thread packs it once.
  Buffer w = random_buffer(DType::f32, {53, 16}, 30), x = random_buffer(DType::f32, {53, 16}, 31), y = random_buffer(DType::f32, {53, 16}, 32);
  check_against_interpreter(golden_input("reuse"), buffers({&w, &x, &y}), {2}, 1e-6);
}

TEST(TileJit, GemmF32EdgesMatchesInterpreter) {
  // Primes everywhere: partial 12-row and 32-column panels, K not a multiple of 16.
  Buffer a = random_buffer(DType::f32, {67, 53}, 4), b = random_buffer(DType::f32, {53, 83}, 5), c = random_buffer(DType::f32, {67, 83}, 6);
  check_against_interpreter(golden_input("gemm_edges"), buffers({&a, &b, &c}), {2}, 1e-5);
}

TEST(TileJit, GemmTransposedBf16MatchesInterpreter) {
  Buffer a = random_buffer(DType::bf16, {131, 50}, 7), b = random_buffer(DType::bf16, {70, 131}, 8), c = random_buffer(DType::f32, {50, 70}, 9);
  check_against_interpreter(golden_input("gemm_nt"), buffers({&a, &b, &c}), {2}, 1e-5);
}

TEST(TileJit, ElementwiseAndReductionsMatchInterpreter) {
  Buffer x = random_buffer(DType::f32, {29, 32}, 10), y = random_buffer(DType::f32, {29, 32}, 11), s = random_buffer(DType::f32, {29}, 12);
  check_against_interpreter(golden_input("rows"), buffers({&x, &y, &s}), {1, 2}, 1e-6);
  Buffer x2 = random_buffer(DType::f32, {37, 128}, 13), y2 = random_buffer(DType::bf16, {37, 128}, 14);
  check_against_interpreter(example("softmax_rows.tile"), buffers({&x2, &y2}), {1}, 1e-2);
}

// fill and tile-to-tile copy, the statements both emitters share (TileEmitter): a fill value
// other than the 0 and -inf the example programs use, so a fill that writes the wrong value, or
// only part of the tile, shows in Y. R = 13 leaves a ragged last row block.
TEST(TileJit, FillAndTileCopyMatchInterpreter) {
  const Program p = parse(R"(kernel fill_copy(X: f32[R, 16], Y: f32[R, 16]) grid(br = ceildiv(R, 4)) {
  alloc x: fragment f32[4, 16]
  alloc t: fragment f32[4, 16]
  fill t, 2.5
  copy X[br * 4, 0] -> x
  parallel i, j in x {
    x[i, j] = x[i, j] + t[i, j]
  }
  copy x -> t
  copy t -> Y[br * 4, 0]
}
)",
                          "fill_copy");
  Buffer x = random_buffer(DType::f32, {13, 16}, 40), y = random_buffer(DType::f32, {13, 16}, 41);
  check_against_interpreter(p, buffers({&x, &y}), {1}, 1e-6);
}

TEST(TileJit, TiledLoopsMatchInterpreter) {
  // R = 37: 10 row blocks = 3 whole tiles of 3 (unrolled) + a remainder of 1; R = 8: remainder only.
  for (int64_t r : {37, 8, 0}) {
    Buffer x = random_buffer(DType::f32, {r, 16}, 20), y = random_buffer(DType::f32, {r, 16}, 21);
    check_against_interpreter(golden_input("tiled"), buffers({&x, &y}), {1}, 1e-6);
  }
}

TEST(TileJit, CacheHitsAreFast) {
  test_cache_dir();
  const Program p = golden_input("rows");
  compile(p);  // compiled (or found) by the test above or now
  CompileInfo mem, disk;
  compile(p, {}, &mem);
  CompileOptions no_memory;
  no_memory.memory_cache = false;
  compile(p, no_memory, &disk);
  std::printf("[ tile jit ] cache hit: memory %.3f ms, disk %.3f ms\n", 1e3 * mem.seconds, 1e3 * disk.seconds);
  EXPECT_TRUE(mem.memory_hit);
  EXPECT_TRUE(disk.disk_hit);
  EXPECT_LT(disk.seconds, 0.5);  // the target is < 10 ms; this bound only catches a recompile
}

TEST(TileJit, BadInputsAreErrors) {
  test_cache_dir();
  auto kernel = compile(golden_input("rows"));
  Buffer x(DType::f32, {29, 32}), y(DType::f32, {30, 32}), s(DType::f32, {29});
  try {
    (*kernel)({x, y, s});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Y.shape[0] = 30 but R = 29 (from X.shape[0])"), std::string::npos) << e.what();
  }
  Buffer wrong(DType::bf16, {29, 32});
  EXPECT_THROW((*kernel)({wrong, y, s}), Error);
}

TEST(TileJit, CompilerErrorsShowTheGeneratedLine) {
  test_cache_dir();
  // A runtime directory whose header does not compile stands in for a code generator bug.
  const auto dir = std::filesystem::path(test_cache_dir()) / "broken-runtime";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "sol_tile_runtime.h") << "#pragma once\nnamespace sol_rt {}\n";
  const std::string source = "#include \"sol_tile_runtime.h\"\nint f() { return sol_rt::missing(); }\n";
  ::setenv("SOL_TILE_RUNTIME_DIR", dir.c_str(), 1);
  try {
    build_object("broken-" + std::to_string(::getpid()), source, "broken");
    FAIL();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("generated line 2: int f() { return sol_rt::missing(); }"), std::string::npos) << msg;
  }
  ::unsetenv("SOL_TILE_RUNTIME_DIR");
}

TEST(TileJit, TwoProcessesCompilingOneKernelShareOneEntry) {
  const auto dir = std::filesystem::path(test_cache_dir()) / "race";
  std::filesystem::remove_all(dir);
  const Program p = golden_input("gemm_edges");
  pid_t kids[2];
  for (pid_t& kid : kids) {
    kid = ::fork();
    ASSERT_GE(kid, 0);
    if (kid == 0) {
      ::setenv("SOL_JIT_CACHE_DIR", dir.c_str(), 1);
      int rc = 1;
      try {
        CompileOptions opt;
        opt.memory_cache = false;
        compile(p, opt);
        rc = 0;
      } catch (...) {
      }
      ::_exit(rc);
    }
  }
  for (pid_t kid : kids) {
    int status = 0;
    ::waitpid(kid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  int objects = 0, temporaries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    objects += e.path().extension() == ".so";
    temporaries += e.path().string().find(".tmp.") != std::string::npos;
  }
  EXPECT_EQ(objects, 1);
  EXPECT_EQ(temporaries, 0);
}

}  // namespace
}  // namespace sol::tile
