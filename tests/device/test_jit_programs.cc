// The JIT programs of the GPU ceilings and the sm90 GEMM, compiled by Sol's own NVRTC path
// (the embedded headers, Sol's options, warnings as errors) for sm_90a without a GPU: every
// kernel the launchers look up by name is in the cubin.
#ifdef SOL_HAS_CUDA
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "device/cuda/ceiling_loops.h"
#include "device/cuda/nvrtc_jit.h"
#include "ops/gemm/gemm_sm90_cuda.h"

namespace sol::cuda {
namespace {

class JitPrograms : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "sol_jit_programs_" + std::to_string(::getpid());
    ::setenv("SOL_CUDA_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("SOL_CUDA_CACHE_DIR");
    std::system(("rm -rf '" + dir_ + "'").c_str());
  }
  std::string dir_;
};

void expect_kernels(const CudaProgram& program, std::initializer_list<const char*> kernels) {
  const Cubin cubin = compile_cubin(program, "sm_90a");
  EXPECT_EQ(cubin.image.compare(0, 4, "\x7f" "ELF"), 0) << program.name;
  for (const char* k : kernels) EXPECT_NE(cubin.image.find(k), std::string::npos) << program.name << " lacks " << k;
}

TEST_F(JitPrograms, CeilingLoopsCompileForSm90a) {
  expect_kernels(ceiling_memory_program(), {"sol_ceiling_read", "sol_ceiling_copy", "sol_ceiling_write"});
  expect_kernels(ceiling_compute_program(), {"sol_ceiling_fma", "sol_ceiling_mma_bf16", "sol_ceiling_mma_e4m3"});
}

TEST_F(JitPrograms, Sm90GemmTileKernelsCompileForSm90a) {
  expect_kernels(sm90_gemm_program(), {"sol_sm90_gemm_bf16_128x128x64_s4", "sol_sm90_gemm_e4m3_128x128x128_s4",
                                       "sol_sm90_gemm_e4m3_scaled_128x128x128_s4"});
}

}  // namespace
}  // namespace sol::cuda
#endif
