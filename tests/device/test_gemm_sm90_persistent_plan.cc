// plan_gemm_sm90_persistent: the argument checks and the planned launch of the persistent sm90
// GEMM for one GEMM and both grouped layouts, computed without a GPU (device tensors at
// addresses no host page maps; nothing reads them).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops/gemm/gemm_sm90_persistent.h"
#include "sol/device.h"
#include "sol/error.h"
#include "ops/error_message.h"

namespace sol {
namespace {

using kernels::sm90::GemmGrouping;
using kernels::sm90::Sm90Target;

Tensor dev(uintptr_t address, DType t, std::initializer_list<int64_t> shape) {
  return Tensor(reinterpret_cast<void*>(address), t, shape).on(Device::cuda(0));
}

// What a call throws, as text (tests/ops/error_message.h).
std::string error_of(const std::function<void()>& f) { return testing_errors::message_of(f); }

Sm90PersistentPlan plan(GemmGrouping g, const Tensor& a, const Tensor& b, const Tensor& d, const Tensor* info = nullptr,
                        const Tensor* sa = nullptr, const Tensor* sb = nullptr) {
  return plan_gemm_sm90_persistent(g, a, b, d, info, sa, sb, Sm90Target::h200(), "test_gemm");
}

TEST(GemmSm90PersistentPlan, OneGemmGetsTheChoosersConfigurationAndItsKernel) {
  const Tensor a = dev(0x100000, DType::bf16, {4096, 7168}), b = dev(0x10000000, DType::bf16, {16384, 7168});
  const Tensor d = dev(0x40000000, DType::bf16, {4096, 16384});
  const Sm90PersistentPlan p = plan(GemmGrouping::single, a, b, d);
  EXPECT_EQ(p.kernel, "sol_sm90_gemm_persistent_bf16_" + std::to_string(p.config.block_m) + "x" +
                          std::to_string(p.config.block_n) + "_s" + std::to_string(p.config.stages));
  EXPECT_NE(p.instantiation.find("SOL_SM90_PERSISTENT_KERNEL(bf16, "), std::string::npos);
  EXPECT_EQ(p.ctas, 132u);  // more tiles than SMs: one CTA per SM
  EXPECT_EQ(p.a.box[1], p.config.block_m);
  EXPECT_EQ(p.b.box[1], p.config.block_n);
  EXPECT_EQ(p.b.dims[1], 16384u);
  EXPECT_EQ(p.workspace_bytes, 0u);
  EXPECT_EQ(p.problem.k_blocks, 7168u / 64u);
}

// Layout nn: B [k, n] as stored, planned as MN-major boxes (64 columns by one K block of rows)
// for the bf16_nn kernel; fp8 and the grouped layouts with nn are refused by name.
TEST(GemmSm90PersistentPlan, LayoutNnPlansMnMajorBoxesOfB) {
  const auto nn = [](GemmGrouping g, const Tensor& a, const Tensor& b, const Tensor& d, const Tensor* info = nullptr) {
    return plan_gemm_sm90_persistent(g, a, b, d, info, nullptr, nullptr, Sm90Target::h200(), "test_gemm", {},
                                     Layout::nn);
  };
  const Tensor a = dev(0x100000, DType::bf16, {127, 704}), b = dev(0x10000000, DType::bf16, {704, 200});
  const Tensor d = dev(0x40000000, DType::bf16, {127, 200});
  const Sm90PersistentPlan p = nn(GemmGrouping::single, a, b, d);
  EXPECT_EQ(p.kernel, "sol_sm90_gemm_persistent_bf16_nn_" + std::to_string(p.config.block_m) + "x" +
                          std::to_string(p.config.block_n) + "_s" + std::to_string(p.config.stages));
  EXPECT_EQ(p.instantiation, "SOL_SM90_PERSISTENT_KERNEL(bf16_nn, " + std::to_string(p.config.block_m) + ", " +
                                 std::to_string(p.config.block_n) + ", " + std::to_string(p.config.stages) +
                                 ", 2, false, mn)");
  EXPECT_EQ(p.b.dims[0], 200u);  // N innermost
  EXPECT_EQ(p.b.dims[1], 704u);
  EXPECT_EQ(p.b.strides_bytes[1], 400u);
  EXPECT_EQ(p.b.box[0], 64u);  // one 128-byte swizzled row of N
  EXPECT_EQ(p.b.box[1], p.config.block_k);
  EXPECT_EQ(p.a.dims[0], 704u);
  EXPECT_EQ(p.problem.n, 200u);
  EXPECT_EQ(p.problem.k_blocks, 11u);
  // The nt plan of the same product reads B [n, k]: same configuration, other boxes and kernel.
  const Sm90PersistentPlan t = plan(GemmGrouping::single, a, dev(0x10000000, DType::bf16, {200, 704}), d);
  EXPECT_EQ(t.config.block_n, p.config.block_n);
  EXPECT_EQ(t.instantiation.find("bf16_nn"), std::string::npos);
  EXPECT_NE(t.instantiation.find(", k)"), std::string::npos);
  EXPECT_NE(error_of([&] { nn(GemmGrouping::single, a, dev(0x10000000, DType::bf16, {200, 704}), d); })
                .find("a's K = 704 but b's K = 200"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              nn(GemmGrouping::single, a, dev(0x10000000, DType::bf16, {704, 100}), dev(0x40000000, DType::bf16, {127, 100}));
            }).find("n = 100 is not a multiple of 8"),
            std::string::npos);
  const Tensor a8 = dev(0x100000, DType::f8e4m3, {128, 256}), b8 = dev(0x10000000, DType::f8e4m3, {256, 128});
  EXPECT_NE(error_of([&] { nn(GemmGrouping::single, a8, b8, dev(0x40000000, DType::bf16, {128, 128})); })
                .find("fp8 wgmma reads K-major operands only"),
            std::string::npos);
  const Tensor am = dev(0x100000, DType::bf16, {2, 64, 512}), bg = dev(0x10000000, DType::bf16, {2, 512, 384});
  const Tensor masked = dev(0x200000, DType::i32, {2});
  EXPECT_NE(error_of([&] { nn(GemmGrouping::masked, am, bg, dev(0x40000000, DType::bf16, {2, 64, 384}), &masked); })
                .find("layout nn is for one GEMM"),
            std::string::npos);
}

TEST(GemmSm90PersistentPlan, DecodeShapesSplitKWithAWorkspace) {
  const Tensor a = dev(0x100000, DType::bf16, {1, 7168}), b = dev(0x10000000, DType::bf16, {2112, 7168});
  const Tensor d = dev(0x40000000, DType::bf16, {1, 2112});
  const Sm90PersistentPlan p = plan(GemmGrouping::single, a, b, d);
  ASSERT_GT(p.config.split_k, 1u);
  EXPECT_EQ(p.problem.split_k, p.config.split_k);
  EXPECT_EQ(p.workspace_bytes, uint64_t(p.config.split_k) * 1 * 2112 * 4);
  EXPECT_LE(p.ctas, 132u);
}

// A named configuration (the launcher's $SOL_SM90_GEMM_CONFIG) replaces the chooser's: its
// kernel, grid and workspace follow it; one that does not fit is refused by name.
TEST(GemmSm90PersistentPlan, ANamedConfigurationIsTheOneLaunched) {
  const Tensor a = dev(0x100000, DType::bf16, {4096, 2048}), b = dev(0x10000000, DType::bf16, {7168, 2048});
  const Tensor d = dev(0x40000000, DType::bf16, {4096, 7168});
  const auto named = [&](const std::string& spec) {
    return plan_gemm_sm90_persistent(GemmGrouping::single, a, b, d, nullptr, nullptr, nullptr, Sm90Target::h200(),
                                     "test_gemm", {}, Layout::nt, spec);
  };
  const Sm90PersistentPlan p = named("64x128:s5:k2");
  EXPECT_EQ(p.kernel, "sol_sm90_gemm_persistent_bf16_64x128_s5");
  EXPECT_EQ(p.instantiation, "SOL_SM90_PERSISTENT_KERNEL(bf16, 64, 128, 5, 2, false, k)");
  EXPECT_EQ(p.config.threads, 256u);
  EXPECT_EQ(p.problem.split_k, 2u);
  EXPECT_EQ(p.ctas, 132u);
  EXPECT_EQ(p.workspace_bytes, uint64_t(2) * 4096 * 7168 * 4);
  EXPECT_EQ(named("").kernel, plan(GemmGrouping::single, a, b, d).kernel);
  EXPECT_NE(error_of([&] { named("128x256:s9"); }).find("config '128x256:s9' does not fit"), std::string::npos);
}

// B multicast, named: the cluster kernel, B loaded in half boxes, a grid of whole clusters.
TEST(GemmSm90PersistentPlan, AMulticastConfigurationLaunchesWholeClusters) {
  const Tensor a = dev(0x100000, DType::bf16, {4096, 2048}), b = dev(0x10000000, DType::bf16, {7168, 2048});
  const Tensor d = dev(0x40000000, DType::bf16, {4096, 7168});
  Sm90Target odd = Sm90Target::h200();
  odd.sms = 131;
  const auto named = [&](const std::string& spec, const Sm90Target& t) {
    return plan_gemm_sm90_persistent(GemmGrouping::single, a, b, d, nullptr, nullptr, nullptr, t, "test_gemm", {},
                                     Layout::nt, spec);
  };
  const Sm90PersistentPlan p = named("128x256:s4:c2", odd);
  EXPECT_EQ(p.kernel, "sol_sm90_gemm_persistent_bf16_128x256_s4_c2");
  EXPECT_EQ(p.instantiation, "SOL_SM90_PERSISTENT_CLUSTER_KERNEL(bf16, 128, 256, 4, 2, false, 2)");
  EXPECT_EQ(p.config.cluster_m, 2u);
  EXPECT_EQ(p.b.box[1], 128u);  // each CTA loads half of B's 256 rows
  EXPECT_EQ(p.a.box[1], 128u);
  EXPECT_EQ(p.ctas, 130u);      // 131 SMs: whole clusters only
  const Tensor a_small = dev(0x100000, DType::bf16, {256, 2048}), d_small = dev(0x40000000, DType::bf16, {256, 7168});
  const Sm90PersistentPlan two = plan_gemm_sm90_persistent(GemmGrouping::single, a_small, b, d_small, nullptr, nullptr,
                                                           nullptr, Sm90Target::h200(), "test_gemm", {}, Layout::nt,
                                                           "128x256:c2");
  EXPECT_EQ(two.ctas, 2u * 28u);  // 2 row tiles x 28 column tiles, fewer than the SMs
  const Tensor a_odd = dev(0x100000, DType::bf16, {300, 2048}), d_odd = dev(0x40000000, DType::bf16, {300, 7168});
  EXPECT_NE(error_of([&] {
              plan_gemm_sm90_persistent(GemmGrouping::single, a_odd, b, d_odd, nullptr, nullptr, nullptr,
                                        Sm90Target::h200(), "test_gemm", {}, Layout::nt, "128x256:c2");
            }).find("3 row tiles"),
            std::string::npos);  // A grouped layout of one group may skip tiles on the device: never multicast.
  const Tensor am = dev(0x100000, DType::bf16, {1, 256, 2048}), bm = dev(0x10000000, DType::bf16, {1, 7168, 2048});
  const Tensor masked = dev(0x200000, DType::i32, {1}), dm = dev(0x40000000, DType::bf16, {1, 256, 7168});
  EXPECT_NE(error_of([&] {
              plan_gemm_sm90_persistent(GemmGrouping::masked, am, bm, dm, &masked, nullptr, nullptr, Sm90Target::h200(),
                                        "test_gemm", {}, Layout::nt, "128x256:c2");
            }).find("is for one GEMM"),
            std::string::npos);
}

TEST(GemmSm90PersistentPlan, GroupedLayouts) {
  const Tensor b = dev(0x10000000, DType::bf16, {3, 256, 512});
  const Tensor a = dev(0x100000, DType::bf16, {384, 512}), layout = dev(0x200000, DType::i32, {384});
  const Tensor d = dev(0x40000000, DType::bf16, {384, 256});
  // The layout is never read on the host: planning takes only its shape (no host copy exists).
  const Sm90PersistentPlan c = plan(GemmGrouping::contiguous, a, b, d, &layout);
  EXPECT_EQ(c.problem.grouping, GemmGrouping::contiguous);
  EXPECT_EQ(c.problem.groups, 3u);
  EXPECT_EQ(c.rows, 384u);
  EXPECT_EQ(c.b.dims[1], 3u * 256u);
  EXPECT_EQ(c.instantiation.find("SOL_SM90_PERSISTENT_KERNEL(bf16, "), 0u);
  EXPECT_NE(error_of([&] { plan(GemmGrouping::contiguous, a, b, d, nullptr); }).find("grouped_layout must be an int32"),
            std::string::npos);
  const Tensor short_layout = dev(0x200000, DType::i32, {383});
  EXPECT_NE(error_of([&] { plan(GemmGrouping::contiguous, a, b, d, &short_layout); }).find("grouped_layout.shape"),
            std::string::npos);
  const Tensor am = dev(0x100000, DType::bf16, {3, 64, 512}), masked = dev(0x200000, DType::i32, {3});
  const Tensor dm = dev(0x40000000, DType::bf16, {3, 64, 256});
  const Sm90PersistentPlan m = plan(GemmGrouping::masked, am, b, dm, &masked);
  EXPECT_EQ(m.rows, 3u * 64u);
  EXPECT_EQ(m.problem.m, 64u);
  EXPECT_EQ(m.problem.groups, 3u);
}

// What the chooser sees of a contiguous layout it does not read: m rows in 128-row blocks,
// spread evenly over the groups that can have rows, the last block partial.
TEST(GemmSm90PersistentPlan, ContiguousRowsModel) {
  EXPECT_EQ(contiguous_rows_model(896, 8), (std::vector<int64_t>{128, 128, 128, 128, 128, 128, 128, 0}));
  EXPECT_EQ(contiguous_rows_model(1000, 3), (std::vector<int64_t>{384, 384, 232}));
  EXPECT_EQ(contiguous_rows_model(100, 4), (std::vector<int64_t>{100, 0, 0, 0}));
  EXPECT_EQ(contiguous_rows_model(0, 2), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(contiguous_rows_model(4096 + 7 * 128, 8),
            (std::vector<int64_t>{640, 640, 640, 640, 640, 640, 640, 512}));
  for (int64_t m : {1, 127, 128, 129, 1000, 4992})
    for (int64_t g : {1, 3, 8, 256}) {
      int64_t rows = 0;
      for (int64_t r : contiguous_rows_model(m, g)) {
        EXPECT_GE(r, 0);
        rows += r;
      }
      EXPECT_EQ(rows, m) << m << " rows, " << g << " groups";
    }
}

TEST(GemmSm90PersistentPlan, Fp8NeedsItsBlockScales) {
  const Tensor a = dev(0x100000, DType::f8e4m3, {256, 512}), b = dev(0x10000000, DType::f8e4m3, {384, 512});
  const Tensor d = dev(0x40000000, DType::bf16, {256, 384});
  EXPECT_NE(error_of([&] { plan(GemmGrouping::single, a, b, d); }).find("need a_scales and b_scales"), std::string::npos);
  const Tensor sa = dev(0x300000, DType::f32, {256, 4}), sb = dev(0x400000, DType::f32, {3, 4});
  const Sm90PersistentPlan p = plan(GemmGrouping::single, a, b, d, nullptr, &sa, &sb);
  EXPECT_EQ(p.config.block_n, 128u);
  EXPECT_NE(p.kernel.find("e4m3_scaled_"), std::string::npos);
  const Tensor sb_wrong = dev(0x400000, DType::f32, {4, 4});
  EXPECT_NE(error_of([&] { plan(GemmGrouping::single, a, b, d, nullptr, &sa, &sb_wrong); }).find("b_scales.shape"),
            std::string::npos);
  // Masked: a_scales [G, m, k/128], as grouped_gemm_masked takes them on the host.
  const Tensor am = dev(0x100000, DType::f8e4m3, {2, 64, 512}), bm = dev(0x10000000, DType::f8e4m3, {2, 384, 512});
  const Tensor masked = dev(0x200000, DType::i32, {2}), dm = dev(0x40000000, DType::bf16, {2, 64, 384});
  const Tensor sam = dev(0x300000, DType::f32, {2, 64, 4}), sbm = dev(0x400000, DType::f32, {2, 3, 4});
  EXPECT_FALSE(plan(GemmGrouping::masked, am, bm, dm, &masked, &sam, &sbm).kernel.empty());
  const Tensor sam_flat = dev(0x300000, DType::f32, {128, 4});
  EXPECT_NE(error_of([&] { plan(GemmGrouping::masked, am, bm, dm, &masked, &sam_flat, &sbm); }).find("a_scales.shape"),
            std::string::npos);
}

TEST(GemmSm90PersistentPlan, BadArgumentsAreNamed) {
  const Tensor a = dev(0x100000, DType::bf16, {64, 128}), b = dev(0x10000000, DType::bf16, {64, 128});
  const Tensor d = dev(0x40000000, DType::bf16, {64, 64});
  EXPECT_NE(error_of([&] { plan(GemmGrouping::single, a, b, dev(0x40000000, DType::bf16, {64, 60})); }).find("d.shape"),
            std::string::npos);
  EXPECT_NE(error_of([&] { plan(GemmGrouping::single, a, dev(0x10000000, DType::f8e4m3, {64, 128}), d); }).find("both must be bf16"),
            std::string::npos);
  EXPECT_NE(error_of([&] { plan(GemmGrouping::single, a, b, dev(0x40000000, DType::i32, {64, 64})); }).find("must be bf16 or f32"),
            std::string::npos);
  const Tensor host_d(reinterpret_cast<void*>(0x40000000), DType::bf16, {64, 64});
  EXPECT_NE(error_of([&] { plan(GemmGrouping::single, a, b, host_d); }).find("share one CUDA device"), std::string::npos);
  // A misaligned base breaks TMA's 16-byte rule: named before any driver call.
  EXPECT_NE(error_of([&] { plan(GemmGrouping::single, dev(0x100008, DType::bf16, {64, 128}), b, d); }).find("16-byte"),
            std::string::npos);
  // Nothing to compute: no kernel.
  EXPECT_TRUE(plan(GemmGrouping::single, dev(0x100000, DType::bf16, {0, 128}), b, dev(0x40000000, DType::bf16, {0, 64}))
                  .kernel.empty());
}

// The epilogue goes to the kernel as device addresses and flags; C is read only when beta != 0
// (in place when none is given); f32 D changes the output bytes the chooser models.
TEST(GemmSm90PersistentPlan, EpilogueBecomesTheKernelsParameters) {
  const Tensor a = dev(0x100000, DType::bf16, {256, 512}), b = dev(0x10000000, DType::bf16, {384, 512});
  const Tensor d = dev(0x40000000, DType::bf16, {256, 384}), c = dev(0x50000000, DType::bf16, {256, 384});
  const Tensor bias = dev(0x60000000, DType::f32, {384});
  Sm90Epilogue e;
  e.alpha = 0.5f;
  e.c = &c;
  e.bias = &bias;
  e.silu = true;
  const auto with = [&](const Tensor& out, const Sm90Epilogue& ep) {
    return plan_gemm_sm90_persistent(GemmGrouping::single, a, b, out, nullptr, nullptr, nullptr,
                                     Sm90Target::h200(), "test_gemm", ep);
  };
  Sm90PersistentPlan p = with(d, e);
  EXPECT_EQ(p.epilogue.d, d.device_data());
  EXPECT_EQ(p.epilogue.c, d.device_data());  // beta == 0: C is not read, nor checked
  EXPECT_EQ(p.epilogue.bias, bias.device_data());
  EXPECT_EQ(p.epilogue.alpha, 0.5f);
  EXPECT_EQ(p.epilogue.silu, 1u);
  EXPECT_EQ(p.epilogue.d_f32, 0u);
  e.beta = 1.0f;
  p = with(d, e);
  EXPECT_EQ(p.epilogue.c, c.device_data());
  EXPECT_EQ(p.epilogue.beta, 1.0f);
  e.c = nullptr;
  EXPECT_EQ(with(d, e).epilogue.c, d.device_data());  // in place
  const Tensor d32 = dev(0x40000000, DType::f32, {256, 384}), c32 = dev(0x50000000, DType::f32, {256, 384});
  e.c = &c32;
  p = with(d32, e);
  EXPECT_EQ(p.epilogue.d_f32, 1u);
  EXPECT_EQ(p.epilogue.c, c32.device_data());
  // Grouped GEMMs take f32 D too (no other epilogue option there).
  const Tensor bg = dev(0x10000000, DType::bf16, {2, 384, 512}), am = dev(0x100000, DType::bf16, {2, 64, 512});
  const Tensor masked = dev(0x200000, DType::i32, {2}), dm = dev(0x40000000, DType::f32, {2, 64, 384});
  EXPECT_EQ(plan(GemmGrouping::masked, am, bg, dm, &masked).epilogue.d_f32, 1u);
  // Bad epilogue operands are named.
  e.c = &c;  // bf16 C with f32 D
  EXPECT_NE(error_of([&] { with(d32, e); }).find("C has D's dtype"), std::string::npos);
  const Tensor host_bias(reinterpret_cast<void*>(0x60000000), DType::f32, {384});
  e.c = nullptr;
  e.bias = &host_bias;
  EXPECT_NE(error_of([&] { with(d, e); }).find("bias is on"), std::string::npos);
  const Tensor bias16 = dev(0x60000000, DType::bf16, {384}), bias_short = dev(0x60000000, DType::f32, {383});
  e.bias = &bias16;
  EXPECT_NE(error_of([&] { with(d, e); }).find("bias.dtype"), std::string::npos);
  e.bias = &bias_short;
  EXPECT_NE(error_of([&] { with(d, e); }).find("bias.shape"), std::string::npos);
  e.bias = nullptr;
  const Tensor c_short = dev(0x50000000, DType::bf16, {128, 384}), c_overlap = dev(0x40000000 + 256, DType::bf16, {256, 384});
  e.c = &c_short;
  EXPECT_NE(error_of([&] { with(d, e); }).find("c.shape"), std::string::npos);
  e.c = &c_overlap;
  EXPECT_NE(error_of([&] { with(d, e); }).find("c overlaps d"), std::string::npos);
  EXPECT_NE(error_of([&] { with(dev(0x40000000, DType::f16, {256, 384}), {}); }).find("must be bf16 or f32"),
            std::string::npos);
}

}  // namespace
}  // namespace sol
