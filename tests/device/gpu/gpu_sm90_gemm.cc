// The sm90 GEMM tile kernels through their host launcher (ops/gemm/gemm_sm90.h) against the CPU
// GEMM (sol::gemm, layout nt): bf16, fp8 and fp8 with DeepGEMM block scales, at shapes that are
// no multiple of the 128 x 128 tile or of the K block (odd M, N a multiple of 8 only, K a
// multiple of 16 bytes or of 128 with scales). D is poisoned (0xFF) before each launch; the
// relative error norm against the CPU's f32 result must stay within bf16's rounding of D.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_gemm_data.h"
#include "gpu_test.h"
#include "ops/common/compare.h"
#include "ops/gemm/gemm_sm90.h"
#include "sol/copy.h"
#include "sol/device.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "sol/tensor.h"
#include "sol/tuning.h"

namespace sol {

namespace {

using gpu_test::random_host;
using gpu_test::upload;

struct Case {
  DType dtype;
  bool scaled;
  int64_t m, n, k;
};

// The kernels need sm_90a: on another device a test says so and passes as skipped.
bool sm90_or_skip() {
  const CudaDeviceInfo& info = cuda_device(0);
  if (info.cc_major == 9) return true;
  std::printf("skipped: %s is %s, the kernels need sm_90a\n", info.name.c_str(), info.arch().c_str());
  return false;
}

}  // namespace

SOL_GPU_TEST(sm90_gemm_matches_cpu) {
  if (!sm90_or_skip()) return;
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


// sol::gemm and the grouped GEMMs on device tensors (the persistent sm90 kernel through
// gemm_device.cc) against the same calls on the host, by DeepGEMM's metric 1 - 2 sum(xy) /
// sum(x^2 + y^2): < 1e-5 for bf16 inputs, < 1e-3 for fp8; f32 D tighter (bound_of). The epilogue's
// forms (alpha, beta with C or in place, bias, silu, f32 D) at a tile shape, a block-scaled fp8
// shape and a decode shape the chooser splits along K; the grouped layouts' rows that are no
// result must keep their 0xFF poison.
namespace {

std::vector<float> as_f32(const Buffer& b) {
  Buffer f(DType::f32, {b.tensor().numel()});
  cast(Tensor(const_cast<void*>(b.tensor().data()), b.tensor().dtype(), {b.tensor().numel()}), f);
  const float* p = static_cast<const float*>(f.data());
  return std::vector<float>(p, p + b.tensor().numel());
}

// Over the elements whose row is a result (all when `result_row` is empty).
double deepgemm_diff(const Buffer& x, const Buffer& y, int64_t n, const std::vector<bool>& result_row = {}) {
  const std::vector<float> a = as_f32(x), b = as_f32(y);
  double xy = 0, sq = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!result_row.empty() && !result_row[i / size_t(n)]) continue;
    xy += double(a[i]) * b[i];
    sq += double(a[i]) * a[i] + double(b[i]) * b[i];
  }
  return sq == 0 ? 0.0 : 1.0 - 2.0 * xy / sq;  // a NaN anywhere fails the bound
}

Buffer download(const DeviceBuffer& d) {
  Buffer h(d.tensor().dtype(), std::span<const int64_t>(d.tensor().shape().data(), size_t(d.tensor().ndim())));
  transfer(d, h);
  return h;
}

DeviceBuffer poisoned(DType dtype, std::initializer_list<int64_t> shape) {
  DeviceBuffer d(Device::cuda(0), dtype, shape);
  std::vector<uint8_t> poison(size_t(d.tensor().nbytes()), 0xFF);
  transfer(Tensor(poison.data(), dtype, shape), d);
  return d;
}

// DeepGEMM's bounds for bf16 D; f32 D drops D's rounding, so tighter, but the tensor cores'
// fp8 sums within a 128-K block are narrower than f32 (why the recipe promotes), so not f32-tight.
double bound_of(DType in, DType out) {
  if (out == DType::f32) return in == DType::f8e4m3 ? 1e-5 : 1e-8;
  return in == DType::f8e4m3 ? 1e-3 : 1e-5;
}

struct EpilogueCase {
  float alpha, beta;
  bool separate_c, bias, silu;
  DType d;
};

// A case's A and B (and, fp8, their block scales) on the host and on the device, drawn from
// `seed` up.
struct Operands {
  Buffer a, b, sa, sb;
  DeviceBuffer da, db, dsa, dsb;
  Operands(const Case& c, uint64_t seed) {
    const int64_t kb = std::max<int64_t>(c.k / kFp8ScaleBlock, 1), nb = (c.n + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
    a = random_host(c.dtype, c.m, c.k, seed), b = random_host(c.dtype, c.n, c.k, seed + 1);
    sa = random_host(DType::f32, c.m, kb, seed + 2, 0.5f, 2.f), sb = random_host(DType::f32, nb, kb, seed + 3, 0.5f, 2.f);
    da = upload(a), db = upload(b), dsa = upload(sa), dsb = upload(sb);
  }
  // sol::gemm with `opt` on the device (into dd) and on the host (into host_d), the block scales
  // of each side added for a scaled case; DeepGEMM's metric between the two results.
  double device_against_host(const Case& c, GemmOptions opt, GemmOptions dopt, DeviceBuffer& dd, Buffer& host_d) const {
    if (c.scaled) opt.a_scales = &sa.tensor(), opt.b_scales = &sb.tensor(), dopt.a_scales = &dsa.tensor(),
                  dopt.b_scales = &dsb.tensor();
    gemm(da, db, dd, dopt);
    synchronize(Device::cuda(0));
    gemm(a, b, host_d, opt);
    return deepgemm_diff(download(dd), host_d, c.n);
  }
};

}  // namespace

SOL_GPU_TEST(sm90_gemm_device_epilogue_matches_cpu) {
  if (!sm90_or_skip()) return;
  const EpilogueCase epilogues[] = {{1, 0, false, false, false, DType::bf16},  {0.5f, 0.75f, true, true, true, DType::bf16},
                                    {1, 1, false, false, false, DType::bf16},  {1, 0, false, false, false, DType::f32},
                                    {-2, 0.5f, true, true, true, DType::f32}, {1, 1, false, true, false, DType::f32}};
  for (const Case& c : {Case{DType::bf16, false, 131, 136, 200}, Case{DType::f8e4m3, true, 77, 264, 384},
                        Case{DType::bf16, false, 1, 2112, 7168}}) {
    const Operands o(c, 21);
    const Buffer bias = random_host(DType::f32, 1, c.n, 25);
    const Tensor bias_1d(const_cast<void*>(bias.tensor().data()), DType::f32, {c.n});
    const DeviceBuffer dbias = upload(bias);
    const Tensor dbias_1d = Tensor(const_cast<void*>(dbias.tensor().device_data()), DType::f32, {c.n}).on(Device::cuda(0));
    for (const EpilogueCase& e : epilogues) {
      const Buffer cm = random_host(e.d, c.m, c.n, 26);
      const DeviceBuffer dc = upload(cm);
      DeviceBuffer dd = e.beta != 0 && !e.separate_c ? upload(cm) : poisoned(e.d, {c.m, c.n});
      Buffer host_d = random_host(e.d, c.m, c.n, 26);  // C in place on the host, as on the device
      GemmOptions opt, dopt;
      opt.layout = Layout::nt;
      opt.alpha = e.alpha, opt.beta = e.beta;
      opt.activation = e.silu ? Activation::silu : Activation::none;
      dopt = opt;
      if (e.separate_c) opt.c = &cm.tensor(), dopt.c = &dc.tensor();
      if (e.bias) opt.bias = &bias_1d, dopt.bias = &dbias_1d;
      const double diff = o.device_against_host(c, opt, dopt, dd, host_d);
      const double bound = bound_of(c.dtype, e.d);
      SOL_EXPECT(diff < bound, dtype_name(c.dtype), " m=", c.m, " n=", c.n, " k=", c.k, " alpha=", e.alpha, " beta=",
                 e.beta, e.separate_c ? " c" : "", e.bias ? " bias" : "", e.silu ? " silu" : "", " d=", dtype_name(e.d),
                 ": diff ", diff);
      std::printf("sol::gemm on cuda:0 %s %lldx%lldx%lld epilogue %g/%g%s%s%s -> %s: diff %.2e\n",
                  std::string(dtype_name(c.dtype)).c_str(), (long long)c.m, (long long)c.n, (long long)c.k, e.alpha,
                  e.beta, e.separate_c ? " c" : "", e.bias ? " bias" : "", e.silu ? " silu" : "",
                  std::string(dtype_name(e.d)).c_str(), diff);
    }
  }
}

// The configurations not yet run on a device (Sm90Target::unproven, which the chooser does not
// pick until measured), each in a first-run test of its own until it has passed on one:
// sol::gemm under a named configuration on the device against the host, by DeepGEMM's metric.
// Stages are named so that the cases share programs (the sweep's, for most): the JIT is most
// of a test's time on a fresh machine.
namespace {

struct NamedCase {
  Case shape;
  const char* spec;
  float alpha;  // 1: the identity epilogue; else the linear form
  DType d = DType::bf16;
};

void run_named_cases(std::initializer_list<NamedCase> cases) {
  for (const NamedCase& nc : cases) {
    const Case& c = nc.shape;
    const ScopedTuning forced(DeviceTuning{nc.spec});
    const Operands o(c, 31);
    DeviceBuffer dd = poisoned(nc.d, {c.m, c.n});
    Buffer host_d(nc.d, {c.m, c.n});
    GemmOptions opt;
    opt.layout = Layout::nt;
    opt.alpha = nc.alpha;
    const double diff = o.device_against_host(c, opt, opt, dd, host_d);
    SOL_EXPECT(diff < bound_of(c.dtype, nc.d), dtype_name(c.dtype), " ", nc.spec, " m=", c.m, " n=", c.n, " k=", c.k,
               " alpha=", nc.alpha, " d=", dtype_name(nc.d), ": diff ", diff);
    std::printf("sol::gemm on cuda:0 %s %lldx%lldx%lld as %s alpha %g -> %s: diff %.2e\n",
                std::string(dtype_name(c.dtype)).c_str(), (long long)c.m, (long long)c.n, (long long)c.k, nc.spec,
                nc.alpha, std::string(dtype_name(nc.d)).c_str(), diff);
  }
}

}  // namespace

// B multicast over clusters of two CTAs (":c2"): bf16 and block-scaled fp8, ragged N, rows past
// M in a pair's second tile, split-K, many waves of tiles over a persistent grid, identity and
// linear epilogues. Three programs.
SOL_GPU_TEST(sm90_gemm_multicast_matches_cpu_first_run) {
  if (!sm90_or_skip()) return;
  run_named_cases({{{DType::bf16, false, 250, 136, 200}, "128x128:s4:c2", 1},
                   {{DType::bf16, false, 512, 392, 1000}, "128x256:s4:c2", 0.5f},
                   {{DType::bf16, false, 256, 264, 2048}, "128x128:s4:k2:c2", 1},
                   {{DType::bf16, false, 4096, 7168, 512}, "128x256:s4:c2", 1},
                   {{DType::f8e4m3, true, 200, 264, 384}, "128x128:s5:c2", 1},
                   {{DType::f8e4m3, true, 4096, 7168, 512}, "128x128:s5:c2", 0.5f}});
}

// The block-scaled 128 x 192 tile over two B scale blocks: tiles starting on a scale block and
// half way into one, ragged N (a tile's second scale block past B's last), split-K, f32 D (six
// 32-column store boxes), many waves, and with multicast. Two programs. (The grouped layouts'
// scale reads are the CPU model's: Sm90GemmPersistentModel.Fp8TilesOfTwoScaleBlocks.)
SOL_GPU_TEST(sm90_gemm_fp8_tile_192_matches_cpu_first_run) {
  if (!sm90_or_skip()) return;
  run_named_cases({{{DType::f8e4m3, true, 77, 264, 384}, "128x192:s4", 1},
                   {{DType::f8e4m3, true, 300, 520, 1024}, "128x192:s4", 0.5f},
                   {{DType::f8e4m3, true, 130, 392, 1024}, "128x192:s4:k2", 1},
                   {{DType::f8e4m3, true, 200, 520, 512}, "128x192:s4", 1, DType::f32},
                   {{DType::f8e4m3, true, 4096, 7168, 512}, "128x192:s4", 1},
                   {{DType::f8e4m3, true, 256, 392, 512}, "128x192:s4:c2", 1}});
}

SOL_GPU_TEST(sm90_grouped_gemm_device_matches_cpu) {
  if (!sm90_or_skip()) return;
  const int64_t groups = 3, n = 264, k = 512, m = 384, max_m = 136;
  std::vector<int32_t> layout(size_t(m), -1);  // expert 0: rows 0-69, expert 1 empty, expert 2: 128-249, 256
  std::fill(layout.begin(), layout.begin() + 70, 0);
  std::fill(layout.begin() + 128, layout.begin() + 250, 2);
  layout[256] = 2;
  std::vector<int32_t> masked = {136, 0, 37};
  for (DType in : {DType::bf16, DType::f8e4m3})
    for (DType out : {DType::bf16, DType::f32}) {
      const bool fp8 = in == DType::f8e4m3;
      const Buffer a = random_host(in, m, k, 31), am = random_host(in, groups * max_m, k, 32);
      const Buffer b = random_host(in, groups * n, k, 33);
      const Tensor b3(const_cast<void*>(b.tensor().data()), in, {groups, n, k});
      const Buffer sa = random_host(DType::f32, m, k / 128, 34, 0.5f, 2.f);
      const Buffer sam = random_host(DType::f32, groups * max_m, k / 128, 35, 0.5f, 2.f);
      const Buffer sb = random_host(DType::f32, groups * ((n + 127) / 128), k / 128, 36, 0.5f, 2.f);
      const Tensor sb3(const_cast<void*>(sb.tensor().data()), DType::f32, {groups, (n + 127) / 128, k / 128});
      const DeviceBuffer da = upload(a), dam = upload(am), db = upload(b), dsa = upload(sa), dsam = upload(sam),
                         dsb = upload(sb);
      const Tensor db3 = Tensor(const_cast<void*>(db.tensor().device_data()), in, {groups, n, k}).on(Device::cuda(0));
      const Tensor dsb3 = Tensor(const_cast<void*>(dsb.tensor().device_data()), DType::f32,
                                 {groups, (n + 127) / 128, k / 128}).on(Device::cuda(0));
      const Tensor dam3 = Tensor(const_cast<void*>(dam.tensor().device_data()), in, {groups, max_m, k}).on(Device::cuda(0));
      const Tensor am3(const_cast<void*>(am.tensor().data()), in, {groups, max_m, k});
      DeviceBuffer dlayout(Device::cuda(0), DType::i32, {m}), dmasked(Device::cuda(0), DType::i32, {groups});
      transfer(Tensor(layout.data(), DType::i32, {m}), dlayout);
      transfer(Tensor(masked.data(), DType::i32, {groups}), dmasked);
      GroupedGemmOptions opt, dopt;
      if (fp8) opt.a_scales = &sa.tensor(), opt.b_scales = &sb3, dopt.a_scales = &dsa.tensor(), dopt.b_scales = &dsb3;
      // Contiguous: padding rows keep the poison.
      DeviceBuffer dd = poisoned(out, {m, n});
      grouped_gemm_contiguous(da, db3, dlayout, dd, dopt);
      synchronize(Device::cuda(0));
      Buffer host_d(out, {m, n});
      grouped_gemm_contiguous(a, b3, Tensor(layout.data(), DType::i32, {m}), host_d, opt);
      const Buffer got = download(dd);
      std::vector<bool> result(static_cast<size_t>(m));
      bool untouched = true;
      const uint8_t* bytes = static_cast<const uint8_t*>(got.tensor().data());
      const size_t row_bytes = size_t(n) * dtype_size(out);
      for (int64_t r = 0; r < m; ++r) {
        result[size_t(r)] = layout[size_t(r)] >= 0;
        if (!result[size_t(r)])
          for (size_t i = 0; i < row_bytes; ++i) untouched = untouched && bytes[size_t(r) * row_bytes + i] == 0xFF;
      }
      double diff = deepgemm_diff(got, host_d, n, result);
      const double bound = bound_of(in, out);
      SOL_EXPECT(untouched, "contiguous ", dtype_name(in), " -> ", dtype_name(out), ": a padding row was written");
      std::string report;
      try {
        check_grouped_layouts(Device::cuda(0));
      } catch (const Error& e) {
        report = e.what();
      }
      SOL_EXPECT(report.empty(), "contiguous ", dtype_name(in), ": a good layout was reported: ", report);
      SOL_EXPECT(diff < bound, "contiguous ", dtype_name(in), " -> ", dtype_name(out), ": diff ", diff);
      std::printf("grouped contiguous on cuda:0 %s -> %s: diff %.2e\n", std::string(dtype_name(in)).c_str(),
                  std::string(dtype_name(out)).c_str(), diff);
      // Masked: rows at or past masked_m keep the poison.
      DeviceBuffer dmd = poisoned(out, {groups, max_m, n});
      const Tensor sam3(const_cast<void*>(sam.tensor().data()), DType::f32, {groups, max_m, k / 128});
      const Tensor dsam3 =
          Tensor(const_cast<void*>(dsam.tensor().device_data()), DType::f32, {groups, max_m, k / 128}).on(Device::cuda(0));
      if (fp8) dopt.a_scales = &dsam3, opt.a_scales = &sam3;
      grouped_gemm_masked(dam3, db3, dmasked, dmd, dopt);
      synchronize(Device::cuda(0));
      Buffer host_md(out, {groups, max_m, n});
      grouped_gemm_masked(am3, b3, Tensor(masked.data(), DType::i32, {groups}), host_md, opt);
      const Buffer got_m = download(dmd);
      std::vector<bool> valid(static_cast<size_t>(groups * max_m));
      untouched = true;
      bytes = static_cast<const uint8_t*>(got_m.tensor().data());
      for (int64_t r = 0; r < groups * max_m; ++r) {
        valid[size_t(r)] = r % max_m < masked[size_t(r / max_m)];
        if (!valid[size_t(r)])
          for (size_t i = 0; i < row_bytes; ++i) untouched = untouched && bytes[size_t(r) * row_bytes + i] == 0xFF;
      }
      diff = deepgemm_diff(got_m, host_md, n, valid);
      SOL_EXPECT(untouched, "masked ", dtype_name(in), " -> ", dtype_name(out), ": a row past masked_m was written");
      SOL_EXPECT(diff < bound, "masked ", dtype_name(in), " -> ", dtype_name(out), ": diff ", diff);
      std::printf("grouped masked on cuda:0 %s -> %s: diff %.2e\n", std::string(dtype_name(in)).c_str(),
                  std::string(dtype_name(out)).c_str(), diff);
    }
}

// A contiguous layout the kernel cannot run (read on the device only, sol/gemm.h): expert 1's
// rows start at row 100, inside a tile of either height, and row 300 holds 7 with 2 experts.
// Its rows 100-127 (the tile of rows 0-127 is expert 0's; with 64-row tiles, rows 64-127's) and
// row 300 stay poisoned, every other row matches the CPU; check_grouped_layouts names row 100
// and clears the report, so a second check and a good call after it report nothing.
SOL_GPU_TEST(sm90_grouped_gemm_bad_layout_is_reported) {
  if (!sm90_or_skip()) return;
  const int64_t groups = 2, n = 136, k = 256, m = 384;
  std::vector<int32_t> layout(size_t(m), -1), good(size_t(m), -1);
  std::fill(layout.begin(), layout.begin() + 100, 0);
  std::fill(layout.begin() + 100, layout.begin() + 228, 1);
  std::fill(layout.begin() + 256, layout.begin() + 320, 1);
  layout[300] = 7;
  std::vector<int32_t> computed = layout;  // the CPU's layout: the rows the device must get right
  std::fill(computed.begin() + 100, computed.begin() + 128, -1);
  computed[300] = -1;
  const Buffer a = random_host(DType::bf16, m, k, 51), b = random_host(DType::bf16, groups * n, k, 52);
  const Tensor b3(const_cast<void*>(b.tensor().data()), DType::bf16, {groups, n, k});
  const DeviceBuffer da = upload(a), db = upload(b);
  const Tensor db3 = Tensor(const_cast<void*>(db.tensor().device_data()), DType::bf16, {groups, n, k}).on(Device::cuda(0));
  DeviceBuffer dlayout(Device::cuda(0), DType::i32, {m});
  transfer(Tensor(layout.data(), DType::i32, {m}), dlayout);
  DeviceBuffer dd = poisoned(DType::bf16, {m, n});
  grouped_gemm_contiguous(da, db3, dlayout, dd);
  std::string report;
  try {
    check_grouped_layouts(Device::cuda(0));
  } catch (const Error& e) {
    report = e.what();
  }
  SOL_EXPECT(report.find("grouped_layout[100] = 1") != std::string::npos, "report: '", report, "'");
  std::printf("bad layout reported: %s\n", report.c_str());
  Buffer host_d(DType::bf16, {m, n});
  grouped_gemm_contiguous(a, b3, Tensor(computed.data(), DType::i32, {m}), host_d);
  const Buffer got = download(dd);
  std::vector<bool> result(static_cast<size_t>(m));
  bool untouched = true;
  const uint8_t* bytes = static_cast<const uint8_t*>(got.tensor().data());
  for (int64_t r = 0; r < m; ++r) {
    result[size_t(r)] = computed[size_t(r)] >= 0;
    if (!result[size_t(r)])
      for (int64_t i = 0; i < n * 2; ++i) untouched = untouched && bytes[r * n * 2 + i] == 0xFF;
  }
  SOL_EXPECT(untouched, "a row of the bad layout (or padding) was written");
  const double diff = deepgemm_diff(got, host_d, n, result);
  SOL_EXPECT(diff < bound_of(DType::bf16, DType::bf16), "the good rows of a bad layout: diff ", diff);
  report.clear();
  try {
    check_grouped_layouts(Device::cuda(0));
  } catch (const Error& e) {
    report = e.what();
  }
  SOL_EXPECT(report.empty(), "the report was not cleared: ", report);
  std::fill(good.begin(), good.begin() + 100, 0);
  std::fill(good.begin() + 128, good.begin() + 228, 1);
  transfer(Tensor(good.data(), DType::i32, {m}), dlayout);
  grouped_gemm_contiguous(da, db3, dlayout, dd);
  try {
    check_grouped_layouts(Device::cuda(0));
  } catch (const Error& e) {
    report = e.what();
  }
  SOL_EXPECT(report.empty(), "a good layout after a bad one was reported: ", report);
}

// Layout nn (B stored [K, N], read MN-major by the wgmma) in both kernels against the CPU's
// sol::gemm with layout nn on the same inputs, by DeepGEMM's metric (< 1e-5 bf16 D, tighter for
// f32 D): the one-tile kernel through gemm_sm90, the persistent one through sol::gemm with its
// epilogue, at odd M (17, 131), N no multiple of the tile, K no multiple of the K block, and an
// M = 1 decode shape the chooser splits along K. D is poisoned first and must hold no poison after.
// fp8 with layout nn stays a clear error.
SOL_GPU_TEST(sm90_gemm_nn_matches_cpu) {
  if (!sm90_or_skip()) return;
  struct Shape {
    int64_t m, n, k;
  };
  // Three shapes only: each persistent configuration is one more NVRTC program on a fresh device
  // (device-check.sh gives all gpu tests 180 s); M = 1 and 127 are in the CPU model's tests.
  for (const Shape& c : {Shape{17, 200, 640}, Shape{131, 264, 1000}, Shape{1, 2112, 7168}}) {
    const Buffer a = random_host(DType::bf16, c.m, c.k, 41), b = random_host(DType::bf16, c.k, c.n, 42);
    const Buffer cm = random_host(DType::bf16, c.m, c.n, 43), bias = random_host(DType::f32, 1, c.n, 44);
    const Tensor bias_1d(const_cast<void*>(bias.tensor().data()), DType::f32, {c.n});
    const DeviceBuffer da = upload(a), db = upload(b), dc = upload(cm), dbias = upload(bias);
    const Tensor dbias_1d = Tensor(const_cast<void*>(dbias.tensor().device_data()), DType::f32, {c.n}).on(Device::cuda(0));
    GemmOptions plain;
    plain.layout = Layout::nn;
    GemmOptions full = plain;
    full.alpha = 0.5f, full.beta = 0.75f, full.activation = Activation::silu;
    for (int form = 0; form < 4; ++form) {
      // 0: the one-tile kernel; 1: sol::gemm; 2: sol::gemm with the whole epilogue; 3: f32 D.
      const DType out = form == 3 ? DType::f32 : DType::bf16;
      GemmOptions opt = form == 2 ? full : plain, dopt = opt;
      if (form == 2) opt.c = &cm.tensor(), dopt.c = &dc.tensor(), opt.bias = &bias_1d, dopt.bias = &dbias_1d;
      DeviceBuffer dd = poisoned(out, {c.m, c.n});
      if (form == 0)
        gemm_sm90(da, db, dd, nullptr, nullptr, Layout::nn);
      else
        gemm(da, db, dd, dopt);
      synchronize(Device::cuda(0));
      Buffer host_d(out, {c.m, c.n});
      gemm(a, b, host_d, opt);
      const double diff = deepgemm_diff(download(dd), host_d, c.n);
      const double bound = bound_of(DType::bf16, out);
      SOL_EXPECT(diff < bound, "nn form ", form, " m=", c.m, " n=", c.n, " k=", c.k, ": diff ", diff);
      std::printf("layout nn on cuda:0 form %d %lldx%lldx%lld -> %s: diff %.2e\n", form, (long long)c.m,
                  (long long)c.n, (long long)c.k, std::string(dtype_name(out)).c_str(), diff);
    }
  }
  const DeviceBuffer a8(Device::cuda(0), DType::f8e4m3, {64, 256}), b8(Device::cuda(0), DType::f8e4m3, {256, 128});
  DeviceBuffer d8(Device::cuda(0), DType::bf16, {64, 128});
  bool refused = false;
  try {
    GemmOptions nn;
    nn.layout = Layout::nn;
    gemm(a8, b8, d8, nn);
  } catch (const Error& e) {
    refused = std::string(e.what()).find("fp8 wgmma reads K-major operands only") != std::string::npos;
  }
  SOL_EXPECT(refused, "fp8 with layout nn must be refused by name");
}

}  // namespace sol
