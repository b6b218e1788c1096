// The cuBLASLt anchor (src/ops/gemm/cublaslt_anchor.h) against the CPU GEMM on small odd shapes,
// so that an anchor computing the wrong product (operands swapped, a scale on the wrong side or
// in the wrong layout) can never be the "faster library" of a ratio: bf16, and fp8 e4m3 with
// the scaling this device's cuBLASLt offers (DeepGEMM's 1x128 / 128x128 block scales on sm_90
// from cuBLAS 12.9; else one scale per tensor, checked against the CPU GEMM with every block
// scale equal to it). D is poisoned (0xFF) before each run.
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "gpu_gemm_data.h"
#include "gpu_test.h"
#include "ops/common/compare.h"
#include "ops/gemm/cublaslt_anchor.h"
#include "sol/copy.h"
#include "sol/device.h"
#include "sol/gemm.h"

namespace sol {

namespace {

using gpu_test::random_host;
using gpu_test::upload;

struct Case {
  DType dtype;
  int64_t m, n, k;
};

// Runs the anchor on the device and returns D as f32 on the host.
Buffer run_anchor(const CublasLtGemm& g, const DeviceBuffer& a, const DeviceBuffer& b, const DeviceBuffer* sa,
                  const DeviceBuffer* sb) {
  const CublasLtProblem& p = g.problem();
  DeviceBuffer d(Device::cuda(0), DType::bf16, {p.m, p.n});
  std::vector<uint8_t> poison(size_t(p.m * p.n * 2), 0xFF);
  transfer(Tensor(poison.data(), DType::bf16, {p.m, p.n}), d);
  g.run(a, b, d, sa ? &sa->tensor() : nullptr, sb ? &sb->tensor() : nullptr);
  synchronize(Device::cuda(0));
  Buffer got(DType::bf16, {p.m, p.n}), got_f32(DType::f32, {p.m, p.n});
  transfer(d, got);
  cast(got, got_f32);
  return got_f32;
}

}  // namespace

SOL_GPU_TEST(cublaslt_anchor_matches_cpu) {
  const CublasLtLibrary& lib = cublaslt_library();
  SOL_EXPECT(lib.loaded, "the anchor needs cuBLASLt: ", lib.reason);
  if (!lib.loaded) return;
  const CudaDeviceInfo& info = cuda_device(0);
  const CublasLtFp8Scaling fp8 = cublaslt_fp8_scaling(lib.version, info.cc_major, info.cc_minor);
  std::printf("cuBLASLt %s (%s) on %s %s: fp8 scaling %s\n", lib.version_text().c_str(), lib.file.c_str(),
              info.name.c_str(), info.arch().c_str(), std::string(cublaslt_fp8_scaling_name(fp8)).c_str());
  int block_checked = 0;  // fp8 cases run with block scales (m = 128 ran so in PyTorch on an H100)
  for (const Case& c : {Case{DType::bf16, 1, 256, 512}, Case{DType::bf16, 131, 136, 200},
                        Case{DType::bf16, 257, 392, 1000}, Case{DType::f8e4m3, 1, 2112, 256},
                        Case{DType::f8e4m3, 77, 264, 384}, Case{DType::f8e4m3, 300, 128, 1024},
                        Case{DType::f8e4m3, 128, 264, 512}}) {
    if (c.dtype == DType::f8e4m3 && fp8 == CublasLtFp8Scaling::none) continue;
    CublasLtProblem p{c.dtype, c.m, c.n, c.k, c.dtype == DType::bf16 ? CublasLtFp8Scaling::none : fp8};
    std::optional<CublasLtGemm> g(std::in_place, Device::cuda(0), p);
    // A shape block scaling has no algorithm for is checked with per-tensor scaling, said so
    // (m = 1: PyTorch's _scaled_mm got CUBLAS_STATUS_NOT_SUPPORTED there on an H100 too).
    if (!g->has_algorithm() && p.scaling == CublasLtFp8Scaling::block_1x128_128x128) {
      std::printf("%s m=%lld n=%lld k=%lld: no block-scaled algorithm, per-tensor instead\n", g->describe().c_str(),
                  (long long)c.m, (long long)c.n, (long long)c.k);
      p.scaling = CublasLtFp8Scaling::per_tensor;
      g.emplace(Device::cuda(0), p);
    }
    block_checked += p.scaling == CublasLtFp8Scaling::block_1x128_128x128;
    SOL_EXPECT(g->has_algorithm(), g->describe(), " m=", c.m, " n=", c.n, " k=", c.k, ": no algorithm");
    if (!g->has_algorithm()) continue;
    const Buffer a = random_host(c.dtype, c.m, c.k, 21), b = random_host(c.dtype, c.n, c.k, 22);
    const int64_t kb = c.k / kFp8ScaleBlock, nb = (c.n + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
    // Sol's block scales [m, kb] and [nb, kb]; per-tensor: every block scale the same.
    const bool per_tensor = p.scaling == CublasLtFp8Scaling::per_tensor;
    Buffer sa = random_host(DType::f32, c.m, std::max<int64_t>(kb, 1), 23, 0.5f, 2.f);
    Buffer sb = random_host(DType::f32, nb, std::max<int64_t>(kb, 1), 24, 0.5f, 2.f);
    if (per_tensor) {
      gpu_test::fill(sa, sa.tensor().data_as<float>()[0]);
      gpu_test::fill(sb, sb.tensor().data_as<float>()[0]);
    }
    const DeviceBuffer da = upload(a), db = upload(b);
    DeviceBuffer dsa, dsb;
    if (p.scaling == CublasLtFp8Scaling::block_1x128_128x128) {
      dsa = upload(cublaslt_a_block_scales(sa));
      dsb = upload(cublaslt_b_block_scales(sb));
    } else if (per_tensor) {
      dsa = gpu_test::upload_scalar(sa.tensor().data_as<float>()[0]);
      dsb = gpu_test::upload_scalar(sb.tensor().data_as<float>()[0]);
    }
    const bool scaled = p.scaling != CublasLtFp8Scaling::none;
    const Buffer got = run_anchor(*g, da, db, scaled ? &dsa : nullptr, scaled ? &dsb : nullptr);
    Buffer ref(DType::f32, {c.m, c.n});
    GemmOptions opt;
    opt.layout = Layout::nt;
    if (scaled) opt.a_scales = &sa.tensor(), opt.b_scales = &sb.tensor();
    gemm(a, b, ref, opt);
    const CheckResult r = compare_relative(got, ref, 1e-2);
    SOL_EXPECT(r.pass, g->describe(), " m=", c.m, " n=", c.n, " k=", c.k, ": error ", r.error, " ", r.detail);
    std::printf("%s %lldx%lldx%lld: relative error %.2e\n", g->describe().c_str(), (long long)c.m, (long long)c.n,
                (long long)c.k, r.error);
  }
  SOL_EXPECT(fp8 != CublasLtFp8Scaling::block_1x128_128x128 || block_checked > 0,
             "block scaling is offered but no fp8 case had a block-scaled algorithm");
}

}  // namespace sol
