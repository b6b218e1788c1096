// The TMA-store epilogue on the device: D is the first m rows of a larger poisoned allocation,
// at shapes whose last row and column tiles are partial (a 64-column box half outside D, M one
// short of a tile, M = 1). TMA must clip every box at D's edges: the guard rows after D keep
// their 0xFF poison, and D equals the CPU path's result (the one-tile kernel through gemm_sm90,
// bf16 D; the persistent kernel through sol::gemm, bf16 and f32 D with an epilogue), and the fp8
// block-scaled kernels, whose two consumers take turns to issue.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu_gemm_data.h"
#include "gpu_test.h"
#include "ops/common/compare.h"
#include "ops/gemm/gemm_sm90.h"
#include "sol/copy.h"
#include "sol/device.h"
#include "sol/gemm.h"
#include "sol/tensor.h"

namespace sol {

namespace {

using gpu_test::random_host;
using gpu_test::upload;

constexpr int64_t kGuardRows = 64;

struct StoreCase {
  int64_t m, n, k;
};

// Runs `call` on D = the first m rows of a poisoned (m + kGuardRows) x n device allocation;
// returns D, and fails when any guard byte changed.
template <class Call>
Buffer run_guarded(DType dtype, int64_t m, int64_t n, const std::string& what, const Call& call) {
  DeviceBuffer all(Device::cuda(0), dtype, {m + kGuardRows, n});
  std::vector<uint8_t> poison(size_t(all.tensor().nbytes()), 0xFF);
  transfer(Tensor(poison.data(), dtype, {m + kGuardRows, n}), all);
  const Tensor d = Tensor(all.tensor().device_data(), dtype, {m, n}).on(Device::cuda(0));
  call(d);
  synchronize(Device::cuda(0));
  transfer(all, Tensor(poison.data(), dtype, {m + kGuardRows, n}));
  const size_t d_bytes = size_t(m * n) * dtype_size(dtype);
  size_t changed = 0;
  for (size_t i = d_bytes; i < poison.size(); ++i) changed += poison[i] != 0xFF;
  SOL_EXPECT(changed == 0, what, ": ", changed, " bytes past D were written");
  Buffer out(dtype, {m, n});
  std::copy_n(poison.data(), d_bytes, static_cast<uint8_t*>(out.data()));
  return out;
}

void expect_close(const Buffer& got, const Buffer& ref, const std::string& what, double tolerance) {
  Buffer g(DType::f32, {got.tensor().shape(0), got.tensor().shape(1)});
  Buffer r(DType::f32, {ref.tensor().shape(0), ref.tensor().shape(1)});
  cast(got, g);
  cast(ref, r);
  const CheckResult c = compare_relative(g, r, tolerance);
  SOL_EXPECT(c.pass, what, ": error ", c.error, " ", c.detail);
  std::printf("%s: relative error %.2e\n", what.c_str(), c.error);
}

}  // namespace

SOL_GPU_TEST(sm90_gemm_tma_store_stays_inside_d) {
  const CudaDeviceInfo& info = cuda_device(0);
  if (info.cc_major != 9) {
    std::printf("skipped: %s is %s, the kernels need sm_90a\n", info.name.c_str(), info.arch().c_str());
    return;
  }
  for (const StoreCase& c : {StoreCase{127, 200, 256}, StoreCase{1, 72, 128}, StoreCase{65, 264, 384}}) {
    const Buffer a = random_host(DType::bf16, c.m, c.k, 41), b = random_host(DType::bf16, c.n, c.k, 42);
    const Buffer bias = random_host(DType::f32, 1, c.n, 43);
    const Tensor bias_1d(const_cast<void*>(bias.tensor().data()), DType::f32, {c.n});
    const DeviceBuffer da = upload(a), db = upload(b), dbias = upload(bias);
    const Tensor dbias_1d = Tensor(const_cast<void*>(dbias.tensor().device_data()), DType::f32, {c.n}).on(Device::cuda(0));
    const std::string shape = std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k);

    GemmOptions plain;
    plain.layout = Layout::nt;
    Buffer ref(DType::bf16, {c.m, c.n});
    gemm(a, b, ref, plain);
    const Buffer tile = run_guarded(DType::bf16, c.m, c.n, "one-tile kernel " + shape,
                                    [&](const Tensor& d) { gemm_sm90(da, db, d); });
    expect_close(tile, ref, "one-tile kernel bf16 D " + shape, 1e-2);

    // fp8 block-scaled: the two consumers' issue turns (named barriers 3 and 4) on the device, in
    // both kernels, K long enough for many turns.
    {
      const int64_t k8 = 1024, kb = k8 / 128, nb = (c.n + 127) / 128;
      const Buffer a8 = random_host(DType::f8e4m3, c.m, k8, 44), b8 = random_host(DType::f8e4m3, c.n, k8, 45);
      const Buffer sa = random_host(DType::f32, c.m, kb, 46, 0.5f, 2.f), sb = random_host(DType::f32, nb, kb, 47, 0.5f, 2.f);
      const DeviceBuffer da8 = upload(a8), db8 = upload(b8), dsa = upload(sa), dsb = upload(sb);
      GemmOptions opt = plain, dopt = plain;
      opt.a_scales = &sa.tensor(), opt.b_scales = &sb.tensor();
      dopt.a_scales = &dsa.tensor(), dopt.b_scales = &dsb.tensor();
      Buffer ref8(DType::bf16, {c.m, c.n});
      gemm(a8, b8, ref8, opt);
      const std::string s8 = std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(k8);
      const Buffer t8 = run_guarded(DType::bf16, c.m, c.n, "one-tile fp8 " + s8,
                                    [&](const Tensor& d) { gemm_sm90(da8, db8, d, &dsa.tensor(), &dsb.tensor()); });
      expect_close(t8, ref8, "one-tile kernel fp8 block-scaled " + s8, 1e-2);
      const Buffer p8 = run_guarded(DType::bf16, c.m, c.n, "persistent fp8 " + s8,
                                    [&](const Tensor& d) { gemm(da8, db8, d, dopt); });
      expect_close(p8, ref8, "persistent kernel fp8 block-scaled " + s8, 1e-2);
    }

    for (DType out : {DType::bf16, DType::f32}) {
      GemmOptions opt = plain, dopt = plain;
      opt.alpha = dopt.alpha = 0.5f;
      opt.activation = dopt.activation = Activation::silu;
      opt.bias = &bias_1d;
      dopt.bias = &dbias_1d;
      Buffer host(out, {c.m, c.n});
      gemm(a, b, host, opt);
      const std::string what = "persistent kernel " + std::string(dtype_name(out)) + " D " + shape;
      const Buffer dev = run_guarded(out, c.m, c.n, what, [&](const Tensor& d) { gemm(da, db, d, dopt); });
      expect_close(dev, host, what, out == DType::f32 ? 1e-5 : 1e-2);
    }
  }
}

}  // namespace sol
