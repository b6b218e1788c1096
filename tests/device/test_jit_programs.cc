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
#include "ops/gemm/gemm_sm90_persistent_cuda.h"
#include "sol/device.h"

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
  expect_kernels(sm90_gemm_program(), {"sol_sm90_gemm_bf16_128x128x64_s4", "sol_sm90_gemm_bf16_nn_128x128x64_s4",
                                       "sol_sm90_gemm_e4m3_128x128x128_s4", "sol_sm90_gemm_e4m3_scaled_128x128x128_s4"});
}

// The persistent GEMM's programs for configurations the chooser picks: decode with split-K,
// a large bf16 GEMM, block-scaled fp8, the masked grouped layout, layout nn (B [k, n]), and a
// named B-multicast configuration (clusters of two).
TEST_F(JitPrograms, Sm90PersistentGemmConfigurationsCompileForSm90a) {
  using kernels::sm90::GemmGrouping;
  const auto dev = [](uintptr_t at, DType t, std::initializer_list<int64_t> shape) {
    return Tensor(reinterpret_cast<void*>(at), t, shape).on(Device::cuda(0));
  };
  const auto target = kernels::sm90::Sm90Target::h200();
  const Tensor a1 = dev(0x100000, DType::bf16, {1, 7168}), b1 = dev(0x10000000, DType::bf16, {2112, 7168});
  const Tensor d1 = dev(0x40000000, DType::bf16, {1, 2112});
  const Sm90PersistentPlan decode =
      plan_gemm_sm90_persistent(GemmGrouping::single, a1, b1, d1, nullptr, nullptr, nullptr, target, "test");
  ASSERT_GT(decode.config.split_k, 1u);
  expect_kernels(sm90_persistent_program(decode), {decode.kernel.c_str(), "sol_sm90_gemm_split_reduce"});
  const Tensor a2 = dev(0x100000, DType::f8e4m3, {4096, 7168}), b2 = dev(0x10000000, DType::f8e4m3, {4096, 7168});
  const Tensor d2 = dev(0x40000000, DType::bf16, {4096, 4096});
  const Tensor sa = dev(0x300000, DType::f32, {4096, 56}), sb = dev(0x400000, DType::f32, {32, 56});
  const Sm90PersistentPlan fp8 =
      plan_gemm_sm90_persistent(GemmGrouping::single, a2, b2, d2, nullptr, &sa, &sb, target, "test");
  expect_kernels(sm90_persistent_program(fp8), {fp8.kernel.c_str()});
  const Tensor am = dev(0x100000, DType::bf16, {4, 64, 2048}), bm = dev(0x10000000, DType::bf16, {4, 7168, 2048});
  const Tensor masked = dev(0x200000, DType::i32, {4}), dm = dev(0x40000000, DType::bf16, {4, 64, 7168});
  const Sm90PersistentPlan grouped =
      plan_gemm_sm90_persistent(GemmGrouping::masked, am, bm, dm, &masked, nullptr, nullptr, target, "test");
  expect_kernels(sm90_persistent_program(grouped), {grouped.kernel.c_str()});
  const Tensor a3 = dev(0x100000, DType::bf16, {2048, 2048}), b3 = dev(0x10000000, DType::bf16, {2048, 2048});
  const Tensor d3 = dev(0x40000000, DType::bf16, {2048, 2048});
  const Sm90PersistentPlan nn = plan_gemm_sm90_persistent(GemmGrouping::single, a3, b3, d3, nullptr, nullptr, nullptr,
                                                          target, "test", {}, Layout::nn);
  ASSERT_NE(nn.kernel.find("_bf16_nn_"), std::string::npos);
  expect_kernels(sm90_persistent_program(nn), {nn.kernel.c_str()});
  // B multicast, named as the sweep and the first-run test name it: the cluster kernel's program.
  const Sm90PersistentPlan multicast = plan_gemm_sm90_persistent(GemmGrouping::single, a2, b2, d2, nullptr, &sa, &sb,
                                                                 target, "test", {}, Layout::nt, "128x128:s5:c2");
  ASSERT_EQ(multicast.kernel, "sol_sm90_gemm_persistent_e4m3_scaled_128x128_s5_c2");
  expect_kernels(sm90_persistent_program(multicast), {multicast.kernel.c_str()});
  const Sm90PersistentPlan wide = plan_gemm_sm90_persistent(GemmGrouping::single, a2, b2, d2, nullptr, &sa, &sb, target,
                                                            "test", {}, Layout::nt, "128x192:s4");
  ASSERT_EQ(wide.kernel, "sol_sm90_gemm_persistent_e4m3_scaled_128x192_s4");
  expect_kernels(sm90_persistent_program(wide), {wide.kernel.c_str()});
}

}  // namespace
}  // namespace sol::cuda
#endif
