// The sm90 GEMM tile kernels through their host launcher (ops/gemm/gemm_sm90.h) against the CPU
// GEMM (sol::gemm, layout nt): bf16, fp8 and fp8 with DeepGEMM block scales, at shapes that are
// no multiple of the 128 x 128 tile or of the K block (odd M, N a multiple of 8 only, K a
// multiple of 16 bytes or of 128 with scales). D is poisoned (0xFF) before each launch; the
// relative error norm against the CPU's f32 result must stay within bf16's rounding of D.
#include <cmath>
#include <cstdint>
#include <vector>

#include "gpu_test.h"
#include "ops/common/compare.h"
#include "ops/gemm/gemm_sm90.h"
#include "sol/copy.h"
#include "sol/device.h"
#include "sol/gemm.h"

namespace sol {

namespace {

// Host values in [-1, 1) (fp8 and bf16 through sol::cast, as the CPU path rounds them).
Buffer random_host(DType dtype, int64_t rows, int64_t cols, uint64_t seed, float low = -1.f, float high = 1.f) {
  Buffer f(DType::f32, {rows, cols}), out(dtype, {rows, cols});
  float* p = static_cast<float*>(f.data());
  for (int64_t i = 0; i < rows * cols; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = low + (high - low) * float(seed >> 40) / float(1 << 24);
  }
  if (dtype == DType::f32) return f;
  cast(f, out);
  return out;
}

DeviceBuffer upload(const Buffer& host) {
  const Tensor& t = host.tensor();
  DeviceBuffer d(Device::cuda(0), t.dtype(), {t.shape(0), t.shape(1)});
  transfer(t, d);
  return d;
}

struct Case {
  DType dtype;
  bool scaled;
  int64_t m, n, k;
};

}  // namespace

SOL_GPU_TEST(sm90_gemm_matches_cpu) {
  const CudaDeviceInfo& info = cuda_device(0);
  if (info.cc_major != 9) {
    std::printf("skipped: %s is %s, the kernels need sm_90a\n", info.name.c_str(), info.arch().c_str());
    return;
  }
  for (const Case& c : {Case{DType::bf16, false, 131, 136, 200}, Case{DType::bf16, false, 1, 8, 8},
                        Case{DType::bf16, false, 257, 392, 1000}, Case{DType::f8e4m3, false, 77, 136, 208},
                        Case{DType::f8e4m3, true, 77, 264, 384}, Case{DType::f8e4m3, true, 300, 128, 1024}}) {
    const Buffer a = random_host(c.dtype, c.m, c.k, 11), b = random_host(c.dtype, c.n, c.k, 12);
    const int64_t kb = c.k / kFp8ScaleBlock, nb = (c.n + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
    const Buffer sa = random_host(DType::f32, c.m, std::max<int64_t>(kb, 1), 13, 0.5f, 2.f);
    const Buffer sb = random_host(DType::f32, nb, std::max<int64_t>(kb, 1), 14, 0.5f, 2.f);
    const DeviceBuffer da = upload(a), db = upload(b), dsa = upload(sa), dsb = upload(sb);
    DeviceBuffer dd(Device::cuda(0), DType::bf16, {c.m, c.n});
    std::vector<uint8_t> poison(size_t(c.m * c.n * 2), 0xFF);
    transfer(Tensor(poison.data(), DType::bf16, {c.m, c.n}), dd);
    gemm_sm90(da, db, dd, c.scaled ? &dsa.tensor() : nullptr, c.scaled ? &dsb.tensor() : nullptr);
    synchronize(Device::cuda(0));
    Buffer got(DType::bf16, {c.m, c.n}), got_f32(DType::f32, {c.m, c.n}), ref(DType::f32, {c.m, c.n});
    transfer(dd, got);
    cast(got, got_f32);
    GemmOptions opt;
    opt.layout = Layout::nt;
    if (c.scaled) {
      opt.a_scales = &sa.tensor(), opt.b_scales = &sb.tensor();
      gemm(a, b, ref, opt);
    } else {
      // The CPU's fp8 GEMM takes scales only; e4m3 values are exact in bf16.
      Buffer a16(DType::bf16, {c.m, c.k}), b16(DType::bf16, {c.n, c.k});
      cast(a, a16);
      cast(b, b16);
      gemm(a16, b16, ref, opt);
    }
    const CheckResult r = compare_relative(got_f32, ref, 1e-2);
    SOL_EXPECT(r.pass, dtype_name(c.dtype), c.scaled ? " scaled" : "", " m=", c.m, " n=", c.n, " k=", c.k, ": error ",
               r.error, " ", r.detail);
    std::printf("sm90 gemm %s%s %lldx%lldx%lld: relative error %.2e\n", std::string(dtype_name(c.dtype)).c_str(),
                c.scaled ? " scaled" : "", (long long)c.m, (long long)c.n, (long long)c.k, r.error);
  }
}

}  // namespace sol
