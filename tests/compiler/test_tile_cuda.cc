// CUDA code generation (sm_90a): the generated source of the example and golden programs
// compiles with nvcc for Hopper. There is no GPU here, so nothing runs; the tests prove the
// code builds, that gemm on bf16 tiles reaches the tensor cores (WMMA in the PTX) and that
// programs the target cannot hold are refused with a clear error. Skipped when nvcc is absent
// ($SOL_NVCC, else /usr/local/cuda/bin/nvcc, else nvcc on PATH).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "sol/error.h"
#include "sol/tile.h"
#include "tile_test_util.h"

namespace sol::tile {
namespace {

using testing::example;
using testing::golden_dir;
using testing::read_text;
using testing::source_root;

std::string find_nvcc() {
  if (const char* env = std::getenv("SOL_NVCC"); env && *env) return env;
  if (std::filesystem::exists("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  if (std::system("command -v nvcc > /dev/null 2>&1") == 0) return "nvcc";
  return "";
}

std::string cuda_source(const Program& p) {
  CompileOptions opt;
  opt.target = Target::cuda;
  return emit_cuda(lower(p, opt));
}

// Compiles `source` with nvcc for sm_90a (to an object, and to PTX); returns the PTX text.
std::string nvcc_compile(const std::string& name, const std::string& source) {
  const std::string nvcc = find_nvcc();
  const auto dir = std::filesystem::temp_directory_path() / ("sol-tile-cuda-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cu = dir / (name + ".cu"), obj = dir / (name + ".o"), ptx = dir / (name + ".ptx"),
             log = dir / (name + ".log");
  std::ofstream(cu) << source;
  const std::string flags = " -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Werror all-warnings -I" +
                            (source_root() / "src/compiler/runtime").string() + " ";
  const std::string cmd = nvcc + flags + "-c " + cu.string() + " -o " + obj.string() + " > " + log.string() +
                          " 2>&1 && " + nvcc + flags + "-ptx " + cu.string() + " -o " + ptx.string() + " >> " +
                          log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << name << ": nvcc failed:\n" << read_text(log) << "\nsource:\n" << source;
  const std::string out = rc == 0 ? read_text(ptx) : "";
  std::filesystem::remove_all(dir);
  return out;
}

#define SKIP_WITHOUT_NVCC()                                                                     \
  if (find_nvcc().empty())                                                                      \
    GTEST_SKIP() << "nvcc not found (set SOL_NVCC or install the CUDA toolkit in /usr/local/cuda); " \
                    "the generated CUDA is not compiled"

Program golden_input(const std::string& name) { return parse(read_text(golden_dir() / (name + ".in.tile")), name); }

TEST(TileCuda, GemmBf16UsesTensorCoresAndBuilds) {
  SKIP_WITHOUT_NVCC();
  const std::string src = cuda_source(example("gemm_bf16_cuda.tile"));
  EXPECT_NE(src.find("wmma::mma_sync"), std::string::npos);
  const std::string ptx = nvcc_compile("gemm_bf16_cuda", src);
  EXPECT_NE(ptx.find("wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32"), std::string::npos);
}

TEST(TileCuda, TransposedGemmBuilds) {
  SKIP_WITHOUT_NVCC();
  // 24 rows: not a multiple of 16, so this gemm takes the CUDA-core path.
  const std::string src = cuda_source(golden_input("gemm_nt"));
  EXPECT_EQ(src.find("wmma::"), std::string::npos);
  nvcc_compile("gemm_nt", src);
}

TEST(TileCuda, F32GemmWithEdgesBuilds) {
  SKIP_WITHOUT_NVCC();
  nvcc_compile("gemm_edges", cuda_source(golden_input("gemm_edges")));
}

TEST(TileCuda, ElementwiseAndReductionsBuild) {
  SKIP_WITHOUT_NVCC();
  nvcc_compile("rows", cuda_source(golden_input("rows")));
  const std::string src = cuda_source(example("softmax_rows.tile"));
  EXPECT_NE(src.find("warp_reduce<sol_cuda::combine_max>"), std::string::npos);
  nvcc_compile("softmax_rows", src);
}

TEST(TileCuda, FlashAttentionBuilds) {
  SKIP_WITHOUT_NVCC();
  const std::string src = cuda_source(example("flash_attention_cuda.tile"));
  const std::string ptx = nvcc_compile("flash_attention", src);
  EXPECT_NE(ptx.find("wmma.mma.sync.aligned.row.col.m16n16k16.f32.bf16.bf16.f32"), std::string::npos);  // Q K^T
  EXPECT_NE(ptx.find("wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32"), std::string::npos);  // P V
}

// These need no nvcc: errors come from the code generator itself.
TEST(TileCuda, TilesLargerThanSharedMemoryAreAnError) {
  EXPECT_THROW(cuda_source(example("flash_attention.tile")), Error);  // 128 query rows: 256 KiB
  try {
    cuda_source(example("gemm_bf16.tile"));  // CPU-sized tiles: 1440 KiB per cell
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs 1474560 bytes of shared memory per cell but a Hopper block may have at most 232448"), std::string::npos) << e.what();
  }
}

TEST(TileCuda, CpuLoweredProgramIsRefused) {
  const Program cpu = lower(example("gemm_bf16_cuda.tile"));  // has ukernel statements
  EXPECT_THROW(emit_cuda(cpu), Error);
  CompileOptions opt;
  opt.target = Target::cuda;
  EXPECT_THROW(compile(example("gemm_bf16_cuda.tile"), opt), Error);  // no CUDA runtime to load into
}

TEST(TileCuda, PipelineIsTileUnrollPlan) {
  EXPECT_EQ(pass_names_for(Target::cuda), (std::vector<std::string>{"tile-loops", "unroll", "plan-scratch"}));
  CompileOptions opt;
  opt.target = Target::cuda;
  opt.dump_after = {"lower-cpu"};
  EXPECT_THROW(lower(example("gemm_bf16_cuda.tile"), opt), Error);
}

}  // namespace
}  // namespace sol::tile
