// GEMM on int8 (vpdpbusd) and on fp8 with DeepGEMM's block scales (widened to bf16, scaled per
// 128-wide K group), against the fp64 reference on every ISA path.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <limits>
#include <string>

#include "hw/kernel_select.h"
#include "ops/random_bytes.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/reference.h"
#include "ops/error_message.h"
#include "ops/gemm_paths.h"
#include "sol/copy.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "sol/quant.h"
#include "sol/threads.h"

namespace sol {
namespace {

using testing_paths::for_each_gemm_path;


std::string shape_of(int64_t m, int64_t n, int64_t k) {
  return "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
}

// ---- int8 -------------------------------------------------------------------------------

Buffer run_int8(DType a_type, int64_t m, int64_t n, int64_t k, Layout layout, bool packed, float beta,
                uint64_t seed, bool check = true) {
  const int64_t bk = layout == Layout::nn ? k : n, bn = layout == Layout::nn ? n : k;
  Buffer a(a_type, {m, k}), b(DType::i8, {bk, bn}), c(DType::i32, {m, n}), d(DType::i32, {m, n});
  fill_bytes(a, seed);
  fill_bytes(b, seed + 1);
  fill_random(c, seed + 2, 1e6);
  poison(d);
  GemmOptions opt;
  opt.layout = layout;
  opt.beta = beta;
  opt.c = &c.tensor();
  if (packed) gemm(a, pack_b(b, layout), d, opt);
  else gemm(a, b, d, opt);
  if (check) {
    Buffer ref(DType::i32, {m, n});
    reference_gemm(a, b, layout, &c.tensor(), 1.0f, beta, nullptr, Activation::none, ref);
    CheckResult r = compare_bitwise(d, ref);
    EXPECT_TRUE(r.pass) << dtype_name(a_type) << " x i8 " << shape_of(m, n, k) << (packed ? " packed" : "")
                        << " beta=" << beta << ": " << r.detail;
  }
  return d;
}

TEST(GemmInt8, ExactOnEveryPathForS8AndU8) {
  for_each_gemm_path([] {
    for (DType a_type : {DType::i8, DType::u8})
      for (Layout layout : {Layout::nn, Layout::nt})
        for (bool packed : {false, true})
          for (auto [m, n, k] : {std::array<int64_t, 3>{1, 1, 1}, {17, 33, 37}, {127, 45, 130}, {13, 65, 1031},
                                 {5, 100, 2100}})
            run_int8(a_type, m, n, k, layout, packed, 0.0f, uint64_t(m * 7 + k));
  });
}

TEST(GemmInt8, AccumulatesIntoCAndSplitsBlocks) {
  for_each_gemm_path([] {
    run_int8(DType::i8, 40, 70, 3000, Layout::nt, false, 1.0f, 3);  // one K block, + C
    run_int8(DType::i8, 20, 40, 9000, Layout::nt, true, 1.0f, 6);   // KC = 4096: three K blocks
    run_int8(DType::i8, 16, 300, 500, Layout::nt, true, 1.0f, 4);    // skinny
  });
  run_int8(DType::u8, 400, 2100, 300, Layout::nn, false, 0.0f, 5);  // N blocks, many row panels
}

TEST(GemmInt8, BitwiseIdenticalForOneAndTwoThreads) {
  set_num_threads(1);
  Buffer one = run_int8(DType::i8, 300, 500, 1200, Layout::nt, false, 0.0f, 8, false);
  set_num_threads(2);
  Buffer two = run_int8(DType::i8, 300, 500, 1200, Layout::nt, false, 0.0f, 8, false);
  Buffer packed = run_int8(DType::i8, 300, 500, 1200, Layout::nt, true, 0.0f, 8, false);
  set_num_threads(0);
  EXPECT_TRUE(compare_bitwise(two, one).pass);
  EXPECT_TRUE(compare_bitwise(packed, one).pass);
}

// ---- fp8 block-scaled ------------------------------------------------------------------

struct Fp8Operands {
  Buffer a, a_scales, b, b_scales;  // a fp8 [m, k] (or bf16 for weight-only), b fp8 [n, k] (nt)
};

// Activations quantized per token (1 x 128), weights per 128 x 128 block, both with Sol's own
// DeepSeek quantizer; values spread over a few binades so the scales differ per block.
Fp8Operands make_fp8(int64_t m, int64_t n, int64_t k, bool weight_only, ScaleFormat format, uint64_t seed) {
  Fp8Operands o;
  Buffer af(DType::f32, {m, k}), bf(DType::f32, {n, k});
  fill_random(af, seed, 3.0);
  fill_random(bf, seed + 1, 0.05);
  float* bp = bf.tensor().data_as<float>();
  for (int64_t i = 0; i < n * k; ++i) bp[i] *= float(1 + (i / k) % 7);  // rows of different size
  QuantOptions q;
  q.scale = format;
  if (weight_only) {
    o.a = Buffer(DType::bf16, {m, k});
    fill_random(o.a, seed + 2, 2.0);
  } else {
    o.a = Buffer(DType::f8e4m3, {m, k});
    o.a_scales = Buffer(DType::f32, {m, k / 128});
    quant_fp8_per_token(af, o.a, o.a_scales, q);
  }
  o.b = Buffer(DType::f8e4m3, {n, k});
  o.b_scales = Buffer(DType::f32, {(n + 127) / 128, k / 128});
  quant_fp8_per_block(bf, o.b, o.b_scales, q);
  return o;
}

Buffer run_fp8(const Fp8Operands& o, DType out, bool packed, bool check = true, const std::string& what = "") {
  const int64_t m = o.a.tensor().shape(0), n = o.b.tensor().shape(0), k = o.b.tensor().shape(1);
  const bool weight_only = o.a.tensor().dtype() == DType::bf16;
  Buffer d(out, {m, n});
  poison(d);
  GemmOptions opt;
  opt.layout = Layout::nt;
  opt.a_scales = weight_only ? nullptr : &o.a_scales.tensor();
  if (packed) {
    gemm(o.a, pack_b(o.b, Layout::nt, &o.b_scales.tensor()), d, opt);
  } else {
    opt.b_scales = &o.b_scales.tensor();
    gemm(o.a, o.b, d, opt);
  }
  if (check) {
    Buffer ref(DType::f32, {m, n});
    reference_gemm(o.a, o.b, Layout::nt, nullptr, 1.0f, 0.0f, nullptr, Activation::none, ref,
                   weight_only ? nullptr : &o.a_scales.tensor(), &o.b_scales.tensor());
    CheckResult r = compare_relative(d, ref, out == DType::bf16 ? 1e-2 : 2e-5);
    EXPECT_TRUE(r.pass) << what << " " << shape_of(m, n, k) << ": " << r.detail;
    EXPECT_LT(gemm_diff_metric(d, ref), 1e-3) << what << " " << shape_of(m, n, k);
  }
  return d;
}

TEST(GemmFp8, BlockScaledMatchesReferenceOnEveryPath) {
  for_each_gemm_path([] {
    for (bool weight_only : {false, true})
      for (bool packed : {false, true})
        for (auto [m, n, k] : {std::array<int64_t, 3>{1, 1, 128}, {17, 33, 256}, {127, 200, 640}, {13, 130, 1152}}) {
          const Fp8Operands o = make_fp8(m, n, k, weight_only, ScaleFormat::f32, uint64_t(m + n));
          run_fp8(o, DType::bf16, packed, true, weight_only ? "bf16 x fp8" : "fp8 x fp8");
          run_fp8(o, DType::f32, packed, true, weight_only ? "bf16 x fp8 -> f32" : "fp8 x fp8 -> f32");
        }
  });
}

TEST(GemmFp8, Ue8m0ScalesAndLargerBlocks) {
  const Fp8Operands o = make_fp8(130, 300, 1024, false, ScaleFormat::ue8m0, 11);
  run_fp8(o, DType::bf16, false, true, "ue8m0");
  run_fp8(o, DType::bf16, true, true, "ue8m0 packed");
  const Fp8Operands s = make_fp8(16, 700, 2048, false, ScaleFormat::f32, 12);  // skinny: KC = K
  run_fp8(s, DType::bf16, true, true, "skinny packed");
  const Fp8Operands blocks = make_fp8(30, 40, 4352, false, ScaleFormat::f32, 13);  // KC = 2048: 3 blocks
  run_fp8(blocks, DType::bf16, false, true, "K blocks");
  run_fp8(blocks, DType::f32, true, true, "K blocks packed");
  run_fp8(s, DType::bf16, true, true, "skinny packed");
}

TEST(GemmFp8, BitwiseIdenticalForThreadsAndPacking) {
  const Fp8Operands o = make_fp8(200, 600, 1024, false, ScaleFormat::f32, 21);
  set_num_threads(1);
  Buffer one = run_fp8(o, DType::bf16, false, false);
  set_num_threads(2);
  Buffer two = run_fp8(o, DType::bf16, false, false);
  Buffer packed = run_fp8(o, DType::bf16, true, false);
  set_num_threads(0);
  EXPECT_TRUE(compare_bitwise(two, one).pass);
  EXPECT_TRUE(compare_bitwise(packed, one).pass);
}

// The avx512 level's VBMI variant (fp8 B widened by byte tables) against its general entry
// (word tables), forced by masking VBMI: the same bits, decode and blocked, packed and plain,
// on both bf16 routes (vdpbf16ps and f32 FMAs).
TEST(GemmFp8, VbmiVariantGivesTheGeneralEntrysBits) {
  if ((kernel_needs_met() & kNeedsVbmi) == 0) GTEST_SKIP() << "no AVX512-VBMI";
  for (bool other_route : {false, true}) {
    std::optional<testing_paths::OtherBf16Route> other;
    if (other_route) other.emplace();
    setenv("SOL_ISA", "avx512", 1);
    SCOPED_TRACE(other_route ? "the other bf16 route" : "this core's bf16 route");
    for (bool weight_only : {false, true})
      for (bool packed : {false, true})
        for (auto [m, n, k] : {std::array<int64_t, 3>{1, 70, 384}, {5, 33, 1152}, {16, 64, 256}, {37, 100, 640}}) {
          const Fp8Operands o = make_fp8(m, n, k, weight_only, ScaleFormat::f32, uint64_t(3 * m + n));
          const std::string what = std::string(weight_only ? "bf16 x fp8" : "fp8 x fp8") + (packed ? " packed" : "");
          Buffer vbmi = run_fp8(o, DType::bf16, packed, true, what + " vbmi");
          const uint32_t before = mask_kernel_needs(0);
          mask_kernel_needs(before | kNeedsVbmi);
          Buffer words = run_fp8(o, DType::bf16, packed, true, what + " word tables");
          mask_kernel_needs(before);
          EXPECT_TRUE(compare_bitwise(vbmi, words).pass) << what << " " << shape_of(m, n, k);
        }
  }
  unsetenv("SOL_ISA");
}

// The first m rows of A (and of its scales) with the same B.
Buffer copy_of(const Buffer& b, int64_t rows) {
  const Tensor& t = b.tensor();
  Buffer r(t.dtype(), {rows, t.shape(1)});
  std::memcpy(r.data(), b.data(), r.bytes());
  return r;
}
Fp8Operands first_rows(const Fp8Operands& o, int64_t m) {
  Fp8Operands r;
  r.a = copy_of(o.a, m);
  if (o.a.tensor().dtype() != DType::bf16) r.a_scales = copy_of(o.a_scales, m);
  r.b = copy_of(o.b, o.b.tensor().shape(0));
  r.b_scales = copy_of(o.b_scales, o.b_scales.tensor().shape(0));
  return r;
}

// Decode over a packed fp8 B with up to kGemmPairMaxRows rows runs two column panels per
// kernel call (two streams of B). Each row must get the bits the same row gets in a 13-row
// call, whose tiles take one panel at a time (any M sums in one order). Shapes: pairs with a
// panel left over, a partial last panel, one panel (no pair), K in two chunks; 1 and 2 threads.
TEST(GemmFp8, PairedPanelDecodeGivesTheOnePanelBits) {
  for_each_gemm_path([] {
    for (bool weight_only : {false, true})
      for (auto [n, k] : {std::array<int64_t, 2>{70, 384}, {96, 256}, {64, 4352}, {32, 128}, {161, 1152}}) {
        const Fp8Operands all = make_fp8(13, n, k, weight_only, ScaleFormat::f32, uint64_t(n + k));
        for (int threads : {1, 2}) {
          set_num_threads(threads);
          Buffer d13 = run_fp8(all, DType::f32, true, false);
          for (int64_t m = 1; m <= 4; ++m) {
            Buffer d = run_fp8(first_rows(all, m), DType::f32, true, m == 1, "paired decode");
            EXPECT_EQ(std::memcmp(d.data(), d13.data(), d.bytes()), 0)
                << (weight_only ? "bf16 x fp8 " : "fp8 x fp8 ") << shape_of(m, n, k) << " threads=" << threads;
          }
        }
        set_num_threads(0);
      }
  });
}

TEST(GemmFp8, NanScaleOrCodePropagatesToItsRowsOnly) {
  for_each_gemm_path([] {
    Fp8Operands o = make_fp8(20, 40, 256, false, ScaleFormat::f32, 31);
    static_cast<uint8_t*>(o.a.data())[3 * 256 + 200] = 0x7F;       // NaN code in row 3
    o.a_scales.tensor().data_as<float>()[7 * 2 + 0] = std::nanf("");  // NaN scale in row 7
    Buffer d = run_fp8(o, DType::f32, false, false);
    const float* p = d.tensor().data_as<const float>();
    for (int64_t i = 0; i < 20; ++i)
      for (int64_t j = 0; j < 40; ++j)
        EXPECT_EQ(std::isnan(p[i * 40 + j]), i == 3 || i == 7) << i << "," << j;
  });
}

using testing_errors::message_of;

TEST(GemmLowPrecision, BadInputThrowsWithClearMessages) {
  Buffer a8(DType::i8, {4, 64}), b8(DType::i8, {64, 8}), d32(DType::i32, {4, 8}), df(DType::f32, {4, 8});
  EXPECT_NE(message_of([&] { gemm(a8, b8, df); }).find("int8 inputs give an i32 output"), std::string::npos);
  GemmOptions alpha;
  alpha.alpha = 2.0f;
  EXPECT_NE(message_of([&] { gemm(a8, b8, d32, alpha); }).find("alpha must be 1"), std::string::npos);
  Buffer bb(DType::bf16, {64, 8});
  EXPECT_NE(message_of([&] { gemm(a8, bb, d32); }).find("is not supported"), std::string::npos);

  Buffer af(DType::f8e4m3, {4, 200}), bf(DType::f8e4m3, {8, 200}), d(DType::bf16, {4, 8});
  GemmOptions nt;
  nt.layout = Layout::nt;
  EXPECT_NE(message_of([&] { gemm(af, bf, d, nt); }).find("k % 128 == 0"), std::string::npos);
  Buffer a2(DType::f8e4m3, {4, 256}), b2(DType::f8e4m3, {8, 256}), sa(DType::f32, {4, 2}), sb(DType::f32, {1, 2});
  EXPECT_NE(message_of([&] { gemm(a2, b2, d, nt); }).find("needs a_scales"), std::string::npos);
  nt.a_scales = &sa.tensor();
  EXPECT_NE(message_of([&] { gemm(a2, b2, d, nt); }).find("needs b_scales"), std::string::npos);
  Buffer sb_bad(DType::f32, {2, 2});
  nt.b_scales = &sb_bad.tensor();
  EXPECT_NE(message_of([&] { gemm(a2, b2, d, nt); }).find("b_scales.shape = [2, 2] but must be [1, 2]"),
            std::string::npos);
  nt.b_scales = &sb.tensor();
  Buffer d32b(DType::i32, {4, 8});
  EXPECT_NE(message_of([&] { gemm(a2, b2, d32b, nt); }).find("gives an f32 or bf16 output"), std::string::npos);
  EXPECT_NE(message_of([] {
              Buffer b(DType::f8e4m3, {8, 256});
              pack_b(b, Layout::nt);
            }).find("needs its b_scales"),
            std::string::npos);
  Buffer bf16a(DType::bf16, {4, 256});
  EXPECT_NE(message_of([&] { gemm(bf16a, b2, d, nt); }).find("a_scales given but a.dtype = bf16"),
            std::string::npos);
}

}  // namespace
}  // namespace sol
