// The sm90 GEMM under forced configurations, for setting the chooser's heuristics from data
// (`SOL_BENCH_GEMM_SWEEP=1 sol_gpu_tests bench_gemm_sweep`, never by ctest; without the variable
// it only says so, so a run of every gpu test does not pay for it; about 30-60 s on an H100,
// most of it the JIT of the configurations, compiled in parallel before anything is timed). Each row runs
// sol::gemm under ScopedTuning with the row's spec as sm90_gemm_config (empty: the chooser's pick) and
// prints the configuration the launcher ran (tile, stages, split-K, tiles, CTAs) beside:
//   us      median of 21 single calls, L2 flushed before each (gpu_bench.h), events around the call;
//   b2b     events around 20 calls back to back, no flush, per call: with `us` it tells a host-side
//           cost per call (b2b well above us for a small shape) from a device-side one;
//   us/wave us / ceil(tiles / CTAs): the time of one tile per CTA, to fit against K (the K-sweep
//           rows share M and N) into a fixed cost per tile and a cost per K block;
//   mma%    FLOPs / us against the measured wgmma peak of the dtype.
// The rows answer, in order: the tile shape and ring depth at a compute-bound shape; the fixed
// cost per tile: D in f32 (twice the epilogue's bytes and boxes), a non-identity epilogue
// (epi "gen", alpha 0.5: the linear form's code per element, epilogue_form) against the identity path ("id") at
// the same shape, and the K sweep (us/wave against K: intercept = cost per tile, slope = cost
// per K block); short K with a huge D (kv_b); split-K at M = 4096 (qkv_a); decode split-K versus
// none; the launch floor; B multicast over clusters of two ("c2", which the chooser takes only
// under SOL_SM90_UNPROVEN=1) against the same tile without, at the compute-bound shape and, for
// fp8, at long K (the cost per K block, where the operands' traffic shows); the block-scaled
// 128 x 192 tile (also unproven) against 128 x 128 at both K, and with multicast.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "device/cuda/nvrtc_jit.h"
#include "device/gpu_ceilings.h"
#include "gpu_bench.h"
#include "gpu_gemm_data.h"
#include "gpu_test.h"
#include "ops/gemm/gemm_sm90_persistent.h"
#include "ops/gemm/gemm_sm90_persistent_cuda.h"
#include "sol/device.h"
#include "sol/gemm.h"
#include "sol/tuning.h"

namespace sol {

namespace {

const Device kDev = Device::cuda(0);

struct SweepCase {
  const char* group;  // what the row is for
  int64_t m, n, k;
  bool fp8;
  bool d_f32;
  float alpha;       // 1: the identity epilogue's store path; else epilogue_value's (general)
  const char* spec;  // DeviceTuning::sm90_gemm_config; "" = the chooser
};

// Block-scaled fp8 takes block_n = 128 only; K-sweep rows name their stages so that short K
// does not clamp the ring into another kernel (the ring is then only partly filled, as it is
// under the chooser's clamp).
const SweepCase kCases[] = {
    {"tile", 4096, 7168, 2048, false, false, 1.0f, ""},
    {"tile", 4096, 7168, 2048, false, false, 1.0f, "128x128"},
    {"tile", 4096, 7168, 2048, false, false, 1.0f, "128x128:s4"},
    {"tile", 4096, 7168, 2048, false, false, 1.0f, "64x256"},
    {"tile", 4096, 7168, 2048, false, false, 1.0f, "64x128"},
    {"epi-f32", 4096, 7168, 2048, false, true, 1.0f, ""},
    {"epi-gen", 4096, 7168, 2048, false, false, 0.5f, ""},
    {"epi-gen", 4096, 7168, 128, false, false, 0.5f, "128x256:s4"},
    {"k-sweep", 4096, 7168, 128, false, false, 1.0f, "128x256:s4"},
    {"k-sweep", 4096, 7168, 512, false, false, 1.0f, "128x256:s4"},
    {"k-sweep", 4096, 7168, 8192, false, false, 1.0f, "128x256:s4"},
    {"k-sweep", 4096, 7168, 128, false, false, 1.0f, "128x128:s6"},
    {"k-sweep", 4096, 7168, 8192, false, false, 1.0f, "128x128:s6"},
    {"kv_b", 4096, 32768, 512, false, false, 1.0f, ""},
    {"kv_b", 4096, 32768, 512, false, false, 1.0f, "128x128"},
    {"qkv_a", 4096, 2112, 7168, false, false, 1.0f, ""},
    {"qkv_a", 4096, 2112, 7168, false, false, 1.0f, "128x256:k1"},
    {"decode", 1, 7168, 2048, false, false, 1.0f, ""},
    {"decode", 1, 7168, 2048, false, false, 1.0f, "64x128:k1"},
    {"decode", 1, 7168, 2048, false, false, 1.0f, "64x256:k1"},
    {"launch", 64, 128, 64, false, false, 1.0f, "64x128:s8"},
    {"tile", 4096, 7168, 2048, true, false, 1.0f, ""},
    {"tile", 4096, 7168, 2048, true, false, 1.0f, "64x128"},
    {"tile", 4096, 7168, 2048, true, false, 1.0f, "128x128:s3"},
    {"epi-gen", 4096, 7168, 2048, true, false, 0.5f, ""},
    {"k-sweep", 4096, 7168, 128, true, false, 1.0f, "128x128:s5"},
    {"k-sweep", 4096, 7168, 512, true, false, 1.0f, "128x128:s5"},
    {"k-sweep", 4096, 7168, 8192, true, false, 1.0f, "128x128:s5"},
    {"decode", 1, 7168, 2048, true, false, 1.0f, ""},
    {"decode", 1, 7168, 2048, true, false, 1.0f, "64x128:k1"},
    {"multicast", 4096, 7168, 2048, false, false, 1.0f, "128x256:s4"},
    {"multicast", 4096, 7168, 2048, false, false, 1.0f, "128x256:s4:c2"},
    {"multicast", 4096, 7168, 2048, true, false, 1.0f, "128x128:s5"},
    {"multicast", 4096, 7168, 2048, true, false, 1.0f, "128x128:s5:c2"},
    {"multicast", 4096, 7168, 8192, true, false, 1.0f, "128x128:s5:c2"},
    {"fp8-192", 4096, 7168, 2048, true, false, 1.0f, "128x192:s4"},
    {"fp8-192", 4096, 7168, 8192, true, false, 1.0f, "128x128:s5"},
    {"fp8-192", 4096, 7168, 8192, true, false, 1.0f, "128x192:s4"},
    {"fp8-192", 4096, 7168, 8192, true, false, 1.0f, "128x192:s4:c2"},
};

// Flat device buffers every row views as its own [m, k], [n, k], [m, n] and scales.
struct Pool {
  DeviceBuffer a16, b16, a8, b8, sa, sb, d16, d32;
  Pool() {
    int64_t a = 0, b = 0, d16n = 0, d32n = 0, sa_n = 0, sb_n = 0;
    for (const SweepCase& c : kCases) {
      a = std::max(a, c.m * c.k), b = std::max(b, c.n * c.k);
      (c.d_f32 ? d32n : d16n) = std::max(c.d_f32 ? d32n : d16n, c.m * c.n);
      sa_n = std::max(sa_n, c.m * (c.k / 128)), sb_n = std::max(sb_n, ((c.n + 127) / 128) * (c.k / 128));
    }
    a16 = random(DType::bf16, a, 1), b16 = random(DType::bf16, b, 2);
    a8 = random(DType::f8e4m3, a, 3), b8 = random(DType::f8e4m3, b, 4);
    sa = random(DType::f32, sa_n, 5, 0.5f, 2.f), sb = random(DType::f32, sb_n, 6, 0.5f, 2.f);
    d16 = DeviceBuffer(kDev, DType::bf16, {std::max<int64_t>(d16n, 1)});
    d32 = DeviceBuffer(kDev, DType::f32, {std::max<int64_t>(d32n, 1)});
  }
  // `count` values uniform in [low, high), uploaded in chunks of one random block.
  static DeviceBuffer random(DType dtype, int64_t count, uint64_t seed, float low = -1.f, float high = 1.f) {
    const int64_t chunk = std::min<int64_t>(count, int64_t(1) << 22);
    const Buffer host = gpu_test::random_host(dtype, 1, chunk, seed, low, high);
    DeviceBuffer d(kDev, dtype, {count});
    for (int64_t at = 0; at < count; at += chunk) {
      const int64_t len = std::min(chunk, count - at);
      transfer(host.tensor().reshape({chunk}).slice(0, 0, len), d.tensor().slice(0, at, at + len));
    }
    return d;
  }
  static Tensor view(const DeviceBuffer& flat, std::initializer_list<int64_t> shape) {
    int64_t count = 1;
    for (int64_t s : shape) count *= s;
    return flat.tensor().slice(0, 0, count).reshape(shape);
  }
};

struct Row {
  const SweepCase* c;
  std::string config, error;
  double us = 0, b2b_us = 0, model_us = 0;
  int64_t tiles = 0, ctas = 0;
};

struct Operands {
  Tensor a, b, d, sa, sb;
  GemmOptions opt;
  Operands(const Pool& p, const SweepCase& c) {
    a = Pool::view(c.fp8 ? p.a8 : p.a16, {c.m, c.k});
    b = Pool::view(c.fp8 ? p.b8 : p.b16, {c.n, c.k});
    d = Pool::view(c.d_f32 ? p.d32 : p.d16, {c.m, c.n});
    opt.layout = Layout::nt;
    opt.alpha = c.alpha;
    if (c.fp8) {
      sa = Pool::view(p.sa, {c.m, c.k / 128});
      sb = Pool::view(p.sb, {(c.n + 127) / 128, c.k / 128});
      opt.a_scales = &sa, opt.b_scales = &sb;
    }
  }
};

kernels::sm90::Sm90Target target() {
  const CudaDeviceInfo& info = cuda_device(kDev.index);
  kernels::sm90::Sm90Target t = kernels::sm90::Sm90Target::h200();
  t.sms = uint32_t(info.sm_count);
  t.smem_per_block = uint32_t(info.max_shared_per_block);
  return t;
}

// Events around `calls` launches with no flush between them: seconds per call.
template <class F>
double back_to_back_seconds(F&& run, int calls) {
  Event start(kDev), stop(kDev);
  run();
  start.record();
  for (int i = 0; i < calls; ++i) run();
  stop.record();
  stop.synchronize();
  return elapsed_seconds(start, stop) / calls;
}

}  // namespace

SOL_GPU_TEST(bench_gemm_sweep) {
  if (!std::getenv("SOL_BENCH_GEMM_SWEEP")) {
    std::printf("bench_gemm_sweep: not run (set SOL_BENCH_GEMM_SWEEP=1)\n");
    return;
  }
  const CudaDeviceInfo& info = cuda_device(kDev.index);
  std::printf("device %s %s, %d SMs\n", info.name.c_str(), info.arch().c_str(), info.sm_count);
  const Pool pool;
  std::vector<Row> rows;
  // Plan every row (the configuration it will run) and compile the distinct programs in
  // parallel: the JIT, not the timing, is most of this bench's time.
  std::vector<cuda::CudaProgram> programs;
  for (const SweepCase& c : kCases) {
    Row r;
    r.c = &c;
    try {
      const Operands o(pool, c);
      Sm90Epilogue epilogue;
      epilogue.alpha = c.alpha;
      const Sm90PersistentPlan plan =
          plan_gemm_sm90_persistent(kernels::sm90::GemmGrouping::single, o.a, o.b, o.d, nullptr, o.opt.a_scales,
                                    o.opt.b_scales, target(), "bench_gemm_sweep", epilogue, Layout::nt, c.spec);
      const auto& k = plan.config;
      r.config = std::to_string(k.block_m) + "x" + std::to_string(k.block_n) + " s" + std::to_string(k.stages) +
                 " k" + std::to_string(k.split_k) + (k.cluster_m > 1 ? " c" + std::to_string(k.cluster_m) : "");
      r.tiles = k.tiles, r.ctas = plan.ctas, r.model_us = k.predicted_us;
      const cuda::CudaProgram p = sm90_persistent_program(plan);
      if (std::none_of(programs.begin(), programs.end(), [&](const cuda::CudaProgram& q) { return q.name == p.name; }))
        programs.push_back(p);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    rows.push_back(r);
  }
  std::vector<std::string> compile_errors(programs.size());
  {
    std::vector<std::thread> jit;
    for (size_t i = 0; i < programs.size(); ++i)
      jit.emplace_back([&, i] {
        try {
          cuda::compile_cubin(programs[i], info.arch());
        } catch (const std::exception& e) {
          compile_errors[i] = e.what();
        }
      });
    for (std::thread& t : jit) t.join();
  }
  for (size_t i = 0; i < programs.size(); ++i)
    SOL_EXPECT(compile_errors[i].empty(), programs[i].name, ": ", compile_errors[i]);
  std::printf("compiled %zu programs\n", programs.size());

  DeviceBuffer flush(kDev, size_t(256) << 20);
  const double peak_bf16 = measure_gpu_ceiling("mma_bf16", kDev, 0.1);
  const double peak_fp8 = measure_gpu_ceiling("mma_fp8", kDev, 0.1);
  std::printf("ceilings: mma_bf16 %.1f TFLOP/s, mma_fp8 %.1f TFLOP/s\n", peak_bf16 / 1e12, peak_fp8 / 1e12);
  std::printf("SWEEP %-8s %-5s %-4s %-3s %5s %6s %6s  %-14s %-15s %6s %5s %6s %9s %9s %8s %9s %5s\n", "group",
              "dtype", "D", "epi", "m", "n", "k", "spec", "ran", "tiles", "ctas", "waves", "us", "b2b_us", "us/wave", "model_us",
              "mma%");
  // Each row is printed as soon as it is timed: a run cut short keeps the rows it measured.
  for (Row& r : rows) {
    const SweepCase& c = *r.c;
    if (r.error.empty()) try {
        const ScopedTuning forced(DeviceTuning{c.spec});  // "" : the chooser
        const Operands o(pool, c);
        const auto run = [&] { gemm(o.a, o.b, o.d, o.opt); };
        run();
        synchronize(kDev);
        r.us = gpu_test::median_seconds(run, flush) * 1e6;
        r.b2b_us = back_to_back_seconds(run, 20) * 1e6;
      } catch (const std::exception& e) {
        r.error = e.what();
      }
    if (!r.error.empty()) {
      std::printf("SWEEP %-8s %-5s %-4s %-3s %5lld %6lld %6lld  %-14s error: %s\n", c.group, c.fp8 ? "fp8" : "bf16",
                  c.d_f32 ? "f32" : "bf16", c.alpha == 1.0f ? "id" : "gen", (long long)c.m, (long long)c.n, (long long)c.k, *c.spec ? c.spec : "auto",
                  r.error.c_str());
      SOL_EXPECT(false, c.group, " ", c.spec, ": ", r.error);
      continue;
    }
    const int64_t waves = (r.tiles + r.ctas - 1) / std::max<int64_t>(r.ctas, 1);
    const double flops = 2.0 * double(c.m) * double(c.n) * double(c.k);
    const double peak = c.fp8 ? peak_fp8 : peak_bf16;
    std::printf("SWEEP %-8s %-5s %-4s %-3s %5lld %6lld %6lld  %-14s %-15s %6lld %5lld %6lld %9.1f %9.1f %8.2f %9.1f %5.1f\n",
                c.group, c.fp8 ? "fp8" : "bf16", c.d_f32 ? "f32" : "bf16", c.alpha == 1.0f ? "id" : "gen", (long long)c.m, (long long)c.n,
                (long long)c.k, *c.spec ? c.spec : "auto", r.config.c_str(), (long long)r.tiles, (long long)r.ctas,
                (long long)waves, r.us, r.b2b_us, r.us / double(std::max<int64_t>(waves, 1)), r.model_us,
                peak > 0 ? 100.0 * flops / (r.us * 1e-6) / peak : 0.0);
  }
  std::printf("bench_gemm_sweep: done, %zu rows\n", rows.size());
}

}  // namespace sol
