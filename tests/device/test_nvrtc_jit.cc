// The NVRTC JIT on the host: NVRTC builds cubins for sm_90a without a GPU, so compiling, the
// cache key and the cache's behaviour are all tested here; only loading needs a device.
#ifdef SOL_HAS_CUDA
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "core/disk_cache.h"
#include "device/cuda/nvrtc_jit.h"
#include "ops/copy/copy_cast_cuda.h"
#include "ops/quant/device_rows_cuda.h"
#include "sol/error.h"

namespace sol::cuda {
namespace {

// Points the cache at a fresh directory for one test.
class NvrtcJit : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "sol_cuda_jit_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::system(("rm -rf '" + dir_ + "'").c_str());
    ::setenv("SOL_CUDA_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override { ::unsetenv("SOL_CUDA_CACHE_DIR"); }
  std::string dir_;
};

CudaProgram small_program() {
  return {"sol_test_scale",
          "extern \"C\" __global__ void scale(float* x, float a, long long n) {\n"
          "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
          "  if (i < n) x[i] *= a;\n"
          "}\n",
          {}};
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_F(NvrtcJit, CompilesACubinForSm90aThenHitsTheCache) {
  const Cubin first = compile_cubin(small_program(), "sm_90a");
  EXPECT_FALSE(first.hit);
  EXPECT_EQ(first.image.compare(0, 4, "\x7f" "ELF"), 0);
  EXPECT_TRUE(contains(first.image, "scale"));
  EXPECT_EQ(first.path.rfind(dir_ + "/", 0), 0u);
  const Cubin second = compile_cubin(small_program(), "sm_90a");
  EXPECT_TRUE(second.hit);
  EXPECT_EQ(second.image, first.image);
}

TEST_F(NvrtcJit, KeyCoversSourceOptionsArchAndHeaders) {
  const CudaProgram p = small_program();
  const std::string k = cubin_cache_key(p, "sm_90a");
  EXPECT_EQ(k, cubin_cache_key(p, "sm_90a"));
  EXPECT_NE(k, cubin_cache_key(p, "sm_100a"));
  CudaProgram other_source = p;
  other_source.source += "\n";
  EXPECT_NE(k, cubin_cache_key(other_source, "sm_90a"));
  CudaProgram other_options = p;
  other_options.options.push_back("-DSOMETHING=1");
  EXPECT_NE(k, cubin_cache_key(other_options, "sm_90a"));
  EXPECT_TRUE(contains(compiler_identity(), "nvrtc "));
  // Every embedded header's text is hashed: the kernels' own header is among them.
  bool found = false;
  for (const EmbeddedHeader& h : embedded_headers()) found |= std::string(h.name) == "kernels/cuda/copy_cast.cuh";
  EXPECT_TRUE(found);
}

TEST_F(NvrtcJit, CorruptedCubinIsRebuilt) {
  const Cubin first = compile_cubin(small_program(), "sm_90a");
  { std::ofstream(first.path, std::ios::trunc) << "\x7f" "ELF truncated"; }
  const Cubin again = compile_cubin(small_program(), "sm_90a");
  EXPECT_FALSE(again.hit);
  EXPECT_EQ(again.image, first.image);
}

TEST_F(NvrtcJit, CompileErrorCarriesTheLog) {
  CudaProgram bad = small_program();
  bad.name = "sol_test_bad";
  bad.source += "extern \"C\" __global__ void broken() { undeclared_thing(); }\n";
  try {
    compile_cubin(bad, "sm_90a");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "undeclared_thing")) << e.what();
    EXPECT_TRUE(contains(e.what(), "sol_test_bad")) << e.what();
  }
}

TEST_F(NvrtcJit, WarningsAreErrors) {
  CudaProgram warns = small_program();
  warns.name = "sol_test_warns";
  warns.source += "extern \"C\" __global__ void unused_var() { int never_used; }\n";
  EXPECT_THROW(compile_cubin(warns, "sm_90a"), Error);
}

TEST_F(NvrtcJit, NvccFallbackUsesItsOwnKey) {
  if (::access("/usr/local/cuda/bin/nvcc", X_OK) != 0 && !std::getenv("SOL_NVCC")) GTEST_SKIP() << "no nvcc";
  const std::string nvrtc_key = cubin_cache_key(small_program(), "sm_90a");
  ::setenv("SOL_CUDA_JIT", "nvcc", 1);
  const std::string nvcc_key = cubin_cache_key(small_program(), "sm_90a");
  Cubin c;
  try {
    c = compile_cubin(small_program(), "sm_90a");
  } catch (...) {
    ::unsetenv("SOL_CUDA_JIT");
    throw;
  }
  ::unsetenv("SOL_CUDA_JIT");
  EXPECT_NE(nvrtc_key, nvcc_key);
  EXPECT_FALSE(c.hit);
  EXPECT_EQ(c.image.compare(0, 4, "\x7f" "ELF"), 0);
  EXPECT_TRUE(contains(c.image, "scale"));
}

// The copy and cast kernels (all 25 format pairs) build for Hopper without a warning.
TEST_F(NvrtcJit, CopyCastProgramBuildsForSm90a) {
  const Cubin c = compile_cubin(copy_cast_program(), "sm_90a");
  EXPECT_TRUE(contains(c.image, "sol_copy_bytes"));
  for (int from = 0; from < 5; ++from)
    for (int to = 0; to < 5; ++to)
      EXPECT_TRUE(contains(c.image, "sol_cast_" + std::to_string(from) + "_" + std::to_string(to)));
}

// The row ops' programs as the JIT builds them (its options: C++17, -lineinfo), every kernel the
// ops name present.
TEST_F(NvrtcJit, RowOpProgramsBuildForSm90a) {
  const Cubin q = compile_cubin(quant_program(), "sm_90a");
  for (const char* k : {"sol_quant_per_token_0", "sol_quant_per_token_1", "sol_quant_per_block_0", "sol_quant_per_block_1"})
    EXPECT_TRUE(contains(q.image, k)) << k;
  const Cubin r = compile_cubin(rmsnorm_program(), "sm_90a");
  for (int x = 0; x < 2; ++x)
    for (int w = 0; w < 2; ++w) {
      const std::string xw = std::to_string(x) + "_" + std::to_string(w);
      EXPECT_TRUE(contains(r.image, "sol_rmsnorm_quant_" + xw));
      for (int y = 0; y < 2; ++y) {
        EXPECT_TRUE(contains(r.image, "sol_rmsnorm_" + xw + "_" + std::to_string(y)));
        for (int res = 0; res < 2; ++res)
          EXPECT_TRUE(contains(r.image, "sol_add_rmsnorm_" + std::to_string(x) + "_" + std::to_string(res) + "_" +
                                            std::to_string(w) + "_" + std::to_string(y)));
      }
    }
  const Cubin a = compile_cubin(activation_program(), "sm_90a");
  for (const char* k : {"sol_silu_mul_0_0", "sol_silu_mul_1_1", "sol_gelu_0_1", "sol_gelu_1_0", "sol_silu_mul_quant_1",
                        "sol_gelu_quant_0"})
    EXPECT_TRUE(contains(a.image, k)) << k;
}

}  // namespace
}  // namespace sol::cuda
#endif
