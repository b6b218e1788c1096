// Device timings of rope, softmax, moe_routing, moe_permute/unpermute and embedding for
// scripts/device-check.sh (not a test: `sol_gpu_tests bench_memory_bound`, never by ctest), on
// the shapes of docs/perf/gpu.md: 4096 x 7168 activations (rope: 4096 tokens x 112 heads x 64
// dims in place), 4096 tokens x 256 experts for routing, DeepSeek-V3's routing (k 8, alignment
// 128) for permute/unpermute, a 129280-row table for embedding. Timed as gpu_bench.h says; the
// bytes are each operand read once and each output written once; SOL% against the HBM copy of
// the same bytes measured beside it. One JSON line per case. rope, unpermute and embedding
// include their index read-back (a small copy ahead of the kernel, the host's check overlapping
// it); permute its host plan (a copy, a synchronisation and two uploads before the launch).
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu_bench.h"
#include "gpu_test.h"
#include "ops/common/fill.h"
#include "sol/activation.h"
#include "sol/embedding.h"
#include "sol/moe_permute.h"
#include "sol/norm.h"
#include "sol/quant.h"
#include "sol/rope.h"
#include "sol/routing.h"
#include "sol/softmax.h"

namespace sol {

namespace {

const Device kDev = Device::cuda(0);

DeviceBuffer random_on_device(DType t, std::initializer_list<int64_t> shape, uint64_t seed, double scale = 4.0) {
  Buffer h(t, shape);
  fill_random(h.tensor(), seed, scale);
  DeviceBuffer d(kDev, t, shape);
  transfer(h.tensor(), d);
  return d;
}

DeviceBuffer ints_on_device(const std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
  DeviceBuffer d(kDev, DType::i32, shape);
  transfer(Tensor(const_cast<int32_t*>(v.data()), DType::i32, shape), d);
  return d;
}

template <class F>
void report(const char* op, const std::string& shape, const char* dtype, double bytes, F&& run,
            const DeviceBuffer& flush) {
  const double t = gpu_test::median_seconds(run, flush), c = gpu_test::copy_ceiling_seconds(bytes, flush);
  std::printf("BENCH {\"op\": \"%s\", \"shape\": \"%s\", \"dtype\": \"%s\", \"time_s\": %.9g, \"bytes\": %.0f, "
              "\"gbps\": %.1f, \"ceiling\": \"hbm_copy (cuMemcpyDtoD, same bytes, same run)\", \"ceiling_gbps\": %.1f, "
              "\"sol_pct\": %.1f}\n",
              op, shape.c_str(), dtype, t, bytes, bytes / t / 1e9, bytes / c / 1e9, 100.0 * c / t);
}

}  // namespace

SOL_GPU_TEST(bench_memory_bound) {
  DeviceBuffer flush(kDev, size_t(256) << 20);
  const int64_t tokens = 4096, hidden = 7168;
  std::mt19937 rng(11);
  for (DType dt : {DType::bf16, DType::f32}) {
    const char* name = dt == DType::bf16 ? "bf16" : "f32";
    const double es = double(dtype_size(dt));
    {  // rope in place: x read and written, the positions' cos/sin rows read
      const RopeTable table(deepseek_v3_rope(), 163840);
      DeviceBuffer x = random_on_device(dt, {tokens, 112, 64}, 1);
      std::vector<int32_t> pos(static_cast<size_t>(tokens));
      for (auto& p : pos) p = int32_t(rng() % 163840);
      DeviceBuffer dp = ints_on_device(pos, {tokens});
      const double bytes = 2 * double(tokens) * hidden * es + double(tokens) * (4 + 2 * 64 * 4);
      report("rope", "4096x112x64", name, bytes, [&] { rope(x, dp, table); }, flush);
    }
    {  // the row ops of issue 22's first half: rmsnorm, per-token fp8 quant, silu-mul, gelu
      DeviceBuffer x = random_on_device(dt, {tokens, hidden}, 8), w = random_on_device(dt, {hidden}, 9),
                   y(kDev, dt, {tokens, hidden}), q(kDev, DType::f8e4m3, {tokens, hidden}),
                   s(kDev, DType::f32, {tokens, hidden / 128});
      const double n = double(tokens) * hidden;
      report("rmsnorm", "4096x7168", name, 2 * n * es + hidden * es, [&] { rmsnorm(x, w, y); }, flush);
      report("quant_fp8_token", "4096x7168", name, n * es + n + n / 32, [&] { quant_fp8_per_token(x, q, s); }, flush);
      report("gelu", "4096x7168", name, 2 * n * es, [&] { gelu(x, y); }, flush);
      DeviceBuffer gu = random_on_device(dt, {tokens, 2 * hidden}, 10);
      report("silu_mul", "4096x(2x7168)", name, 3 * n * es, [&] { silu_mul(gu, y); }, flush);
    }
    {
      DeviceBuffer x = random_on_device(dt, {tokens, hidden}, 2, 8.0), y(kDev, dt, {tokens, hidden});
      report("softmax", "4096x7168", name, 2 * double(tokens) * hidden * es, [&] { softmax(x, y); }, flush);
    }
    {
      DeviceBuffer logits = random_on_device(dt, {tokens, 256}, 3, 3.0), bias = random_on_device(DType::f32, {256}, 4, 0.1);
      DeviceBuffer idx(kDev, DType::i32, {tokens, 8}), w(kDev, DType::f32, {tokens, 8});
      const RoutingOptions o = deepseek_v3_routing(&bias.tensor());
      const double bytes = double(tokens) * 256 * es + 256 * 4 + double(tokens) * 8 * 8;
      report("moe_routing", "4096x256", name, bytes, [&] { moe_routing(logits, idx, w, o); }, flush);
    }
    {  // DeepSeek-V3 routing, every token to 8 distinct experts of 256
      std::vector<int32_t> idx(static_cast<size_t>(tokens * 8));
      for (int64_t t = 0; t < tokens; ++t)
        for (int j = 0; j < 8; ++j) idx[size_t(t * 8 + j)] = int32_t((t * 37 + j * 32 + (rng() % 32)) % 256);
      DeviceBuffer di = ints_on_device(idx, {tokens, 8});
      const int64_t rows = moe_permuted_rows(di, 256, 128);
      DeviceBuffer x = random_on_device(dt, {tokens, hidden}, 5), perm(kDev, dt, {rows, hidden}),
                   layout(kDev, DType::i32, {rows}), row_of(kDev, DType::i32, {tokens, 8}),
                   w = random_on_device(DType::f32, {tokens, 8}, 6, 1.0), out(kDev, dt, {tokens, hidden});
      const double row = double(hidden) * es;
      report("moe_permute", "4096x7168 k8 e256", name, double(tokens) * row + double(rows) * row,
             [&] { moe_permute(x, di, 256, 128, perm, layout, row_of); }, flush);
      report("moe_unpermute", "4096x7168 k8 e256", name, double(tokens) * 8 * row + double(tokens) * row,
             [&] { moe_unpermute(perm, row_of, w, out); }, flush);
      // Permute's host side alone (the routing copied back, checked and counted; no rows move):
      // how much of permute's time is not its kernels.
      std::printf("BENCH {\"op\": \"moe_permuted_rows (host side of permute)\", \"shape\": \"4096 k8 e256\", "
                  "\"dtype\": \"i32\", \"time_s\": %.9g}\n",
                  gpu_test::median_seconds([&] { (void)moe_permuted_rows(di, 256, 128); }, flush));
    }
    {
      DeviceBuffer table = random_on_device(dt, {129280, hidden}, 7), out(kDev, dt, {tokens, hidden});
      std::vector<int32_t> ids(static_cast<size_t>(tokens));
      for (auto& i : ids) i = int32_t(rng() % 129280);
      DeviceBuffer di = ints_on_device(ids, {tokens});
      report("embedding", "4096x7168 vocab 129280", name, 2 * double(tokens) * hidden * es,
             [&] { embedding(table, di, out); }, flush);
    }
  }
}

}  // namespace sol
