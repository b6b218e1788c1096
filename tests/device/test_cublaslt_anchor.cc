// The cuBLASLt anchor's host logic (src/ops/gemm/cublaslt_anchor.h): which fp8 scaling it picks
// for a library version and device, the scale layouts its block modes read, and the checks that
// stop a mis-stated problem before it reaches the library. The device runs are the gpu test
// `cublaslt_anchor_matches_cpu`.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "ops/error_message.h"
#include "ops/gemm/cublaslt_anchor.h"
#include "sol/device.h"

namespace sol {
namespace {

std::string error_of(const std::function<void()>& f) { return testing_errors::message_of(f); }

Tensor on_device(uintptr_t address, DType t, std::initializer_list<int64_t> shape) {
  return Tensor(reinterpret_cast<void*>(address), t, shape).on(Device::cuda(0));
}

TEST(CublasLtAnchor, Fp8ScalingByVersionAndDevice) {
  using S = CublasLtFp8Scaling;
  // Block scales: cuBLAS 12.9 and later, on sm_90 only.
  EXPECT_EQ(cublaslt_fp8_scaling(120900, 9, 0), S::block_1x128_128x128);
  EXPECT_EQ(cublaslt_fp8_scaling(130100, 9, 0), S::block_1x128_128x128);
  EXPECT_EQ(cublaslt_fp8_scaling(120805, 9, 0), S::per_tensor);
  EXPECT_EQ(cublaslt_fp8_scaling(130100, 10, 0), S::per_tensor);
  EXPECT_EQ(cublaslt_fp8_scaling(130100, 12, 0), S::per_tensor);
  EXPECT_EQ(cublaslt_fp8_scaling(130100, 8, 9), S::per_tensor);
  EXPECT_EQ(cublaslt_fp8_scaling(130100, 8, 6), S::none);
  EXPECT_EQ(cublaslt_fp8_scaling(130100, 8, 0), S::none);
  EXPECT_EQ(cublaslt_fp8_scaling_name(S::per_tensor), "per-tensor");
  EXPECT_EQ(cublaslt_fp8_scaling_name(S::block_1x128_128x128), "block 1x128/128x128");
}

TEST(CublasLtAnchor, BlockScaleLayouts) {
  // a_scales [m = 3, kb = 2] -> [kb, m]: one K block's rows side by side.
  Buffer a(DType::f32, {3, 2});
  float* pa = a.tensor().data_as<float>();
  for (int i = 0; i < 6; ++i) pa[i] = float(10 + i);  // row r, block j = 10 + 2r + j
  Buffer at = cublaslt_a_block_scales(a);
  ASSERT_EQ(at.tensor().shape(0), 2);
  ASSERT_EQ(at.tensor().shape(1), 3);
  const float* t = at.tensor().data_as<float>();
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 2; ++j) EXPECT_EQ(t[j * 3 + r], float(10 + 2 * r + j)) << "row " << r << " block " << j;
  // b_scales [nb = 2, kb = 5] -> [nb, 8]: K blocks padded to a multiple of 4 with zeros.
  Buffer b(DType::f32, {2, 5});
  float* pb = b.tensor().data_as<float>();
  for (int i = 0; i < 10; ++i) pb[i] = float(1 + i);
  Buffer bp = cublaslt_b_block_scales(b);
  ASSERT_EQ(bp.tensor().shape(0), 2);
  ASSERT_EQ(bp.tensor().shape(1), 8);
  const float* q = bp.tensor().data_as<float>();
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(q[r * 8 + j], j < 5 ? float(1 + r * 5 + j) : 0.0f) << r << "," << j;
}

TEST(CublasLtAnchor, ProblemChecksNameTheArgument) {
  using S = CublasLtFp8Scaling;
  EXPECT_EQ(error_of([] { check_cublaslt_problem({DType::bf16, 16, 256, 512, S::none}); }), "(no error)");
  EXPECT_EQ(error_of([] { check_cublaslt_problem({DType::f8e4m3, 16, 256, 512, S::block_1x128_128x128}); }),
            "(no error)");
  EXPECT_EQ(error_of([] { check_cublaslt_problem({DType::f8e4m3, 16, 256, 48, S::per_tensor}); }), "(no error)");
  EXPECT_NE(error_of([] { check_cublaslt_problem({DType::f32, 16, 256, 512, S::none}); }).find("bf16 or f8e4m3"),
            std::string::npos);
  EXPECT_NE(error_of([] { check_cublaslt_problem({DType::bf16, 16, 256, 512, S::per_tensor}); }).find("take no scales"),
            std::string::npos);
  EXPECT_NE(error_of([] { check_cublaslt_problem({DType::f8e4m3, 16, 256, 512, S::none}); }).find("need a scaling"),
            std::string::npos);
  EXPECT_NE(error_of([] { check_cublaslt_problem({DType::f8e4m3, 16, 256, 208, S::block_1x128_128x128}); })
                .find("k = 208 but block scaling needs k % 128 == 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { check_cublaslt_problem({DType::f8e4m3, 16, 256, 40, S::per_tensor}); })
                .find("fp8 needs k % 16 == 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { check_cublaslt_problem({DType::bf16, 0, 256, 512, S::none}); }).find("must be >= 1"),
            std::string::npos);
}

TEST(CublasLtAnchor, OperandChecksNameTheArgument) {
  using S = CublasLtFp8Scaling;
  const CublasLtProblem bf16{DType::bf16, 17, 256, 384, S::none};
  const Tensor a = on_device(0x1000, DType::bf16, {17, 384}), b = on_device(0x9000, DType::bf16, {256, 384}),
               d = on_device(0x90000, DType::bf16, {17, 256});
  EXPECT_EQ(error_of([&] { check_cublaslt_operands(bf16, a, b, d, nullptr, nullptr); }), "(no error)");
  const Tensor bt = on_device(0x9000, DType::bf16, {384, 256});
  EXPECT_NE(error_of([&] { check_cublaslt_operands(bf16, a, bt, d, nullptr, nullptr); }).find("b must be [256, 384]"),
            std::string::npos);
  const Tensor d32 = on_device(0x90000, DType::f32, {17, 256});
  EXPECT_NE(error_of([&] { check_cublaslt_operands(bf16, a, b, d32, nullptr, nullptr); }).find("must be bf16"),
            std::string::npos);
  const Tensor host_a(reinterpret_cast<void*>(0x1000), DType::bf16, {17, 384});
  EXPECT_NE(error_of([&] { check_cublaslt_operands(bf16, host_a, b, d, nullptr, nullptr); }).find("on the host"),
            std::string::npos);
  const Tensor other_d = on_device(0x90000, DType::bf16, {17, 256}).on(Device::cuda(1));
  EXPECT_NE(error_of([&] { check_cublaslt_operands(bf16, a, b, other_d, nullptr, nullptr); }).find("share one device"),
            std::string::npos);

  const CublasLtProblem block{DType::f8e4m3, 17, 256, 384, S::block_1x128_128x128};
  const Tensor a8 = on_device(0x1000, DType::f8e4m3, {17, 384}), b8 = on_device(0x9000, DType::f8e4m3, {256, 384});
  // Sol's own layouts ([m, k/128] and [ceil(n/128), k/128]) are not cuBLASLt's: named.
  const Tensor sa = on_device(0xA0000, DType::f32, {3, 17}), sb = on_device(0xB0000, DType::f32, {2, 4});
  EXPECT_EQ(error_of([&] { check_cublaslt_operands(block, a8, b8, d, &sa, &sb); }), "(no error)");
  const Tensor sa_sol = on_device(0xA0000, DType::f32, {17, 3}), sb_sol = on_device(0xB0000, DType::f32, {2, 3});
  EXPECT_NE(error_of([&] { check_cublaslt_operands(block, a8, b8, d, &sa_sol, &sb); }).find("a_scales must be [3, 17]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_cublaslt_operands(block, a8, b8, d, &sa, &sb_sol); }).find("b_scales must be [2, 4]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_cublaslt_operands(block, a8, b8, d, nullptr, &sb); }).find("a_scales is missing"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_cublaslt_operands(block, a, b, d, &sa, &sb); }).find("prepared for f8e4m3"),
            std::string::npos);
  const CublasLtProblem tensor{DType::f8e4m3, 17, 256, 384, S::per_tensor};
  const Tensor one_a = on_device(0xA0000, DType::f32, {1, 1}), one_b = on_device(0xB0000, DType::f32, {1, 1});
  EXPECT_EQ(error_of([&] { check_cublaslt_operands(tensor, a8, b8, d, &one_a, &one_b); }), "(no error)");
  EXPECT_NE(error_of([&] { check_cublaslt_operands(tensor, a8, b8, d, &sa, &one_b); }).find("a_scales must be [1, 1]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { check_cublaslt_operands(bf16, a, b, d, &one_a, &one_b); }).find("take no scales"),
            std::string::npos);
}

// Layout nn (B [k, n]): bf16 only, its B checked in that shape.
TEST(CublasLtAnchor, LayoutNnIsBf16WithBStoredKByN) {
  using S = CublasLtFp8Scaling;
  const CublasLtProblem nn{DType::bf16, 17, 256, 384, S::none, Layout::nn};
  EXPECT_EQ(error_of([&] { check_cublaslt_problem(nn); }), "(no error)");
  EXPECT_NE(error_of([] { check_cublaslt_problem({DType::f8e4m3, 16, 256, 512, S::per_tensor, Layout::nn}); })
                .find("cuBLASLt's fp8 kernels take B stored [N, K] only"),
            std::string::npos);
  const Tensor a = on_device(0x1000, DType::bf16, {17, 384}), b_kn = on_device(0x9000, DType::bf16, {384, 256}),
               b_nk = on_device(0x9000, DType::bf16, {256, 384}), d = on_device(0x90000, DType::bf16, {17, 256});
  EXPECT_EQ(error_of([&] { check_cublaslt_operands(nn, a, b_kn, d, nullptr, nullptr); }), "(no error)");
  EXPECT_NE(error_of([&] { check_cublaslt_operands(nn, a, b_nk, d, nullptr, nullptr); })
                .find("b must be [384, 256] (layout nn: B stored [K, N])"),
            std::string::npos);
}

// The library is found through dlopen or its absence is a sentence; preparing an anchor without
// a device is a sol::Error naming why, never a crash (this machine has cuBLAS but no driver).
TEST(CublasLtAnchor, LoadsOrSaysWhyAndNeedsADevice) {
  const CublasLtLibrary& lib = cublaslt_library();
  if (lib.loaded) {
    EXPECT_GE(lib.version, 110000u) << lib.file;
    EXPECT_FALSE(lib.file.empty());
  } else {
    EXPECT_FALSE(lib.reason.empty());
  }
  std::printf("cuBLASLt: %s\n", lib.loaded ? (lib.version_text() + " from " + lib.file).c_str() : lib.reason.c_str());
  if (!cuda_discovery().devices.empty()) GTEST_SKIP() << "a device exists: the gpu tests prepare the anchor";
  const std::string e = error_of([] { CublasLtGemm g(Device::cuda(0), {DType::bf16, 16, 256, 512, CublasLtFp8Scaling::none}); });
  EXPECT_EQ(e.rfind("cublaslt", 0), 0u) << e;
}

}  // namespace
}  // namespace sol
