// `sol tune`'s workloads: GEMM blocking on a prefill shape and B prefetch on a decode, the
// streaming threshold on chains of copies from L2-sized to past the LLC, softmax pipelining on short row ranges, the
// row kernels' look-ahead on row ops whose inputs come from memory.
#include "ops/tune/tune_cases.h"

#include <algorithm>

#include "ops/common/fill.h"
#include "ops/tune/cold_ring.h"
#include "sol/copy.h"
#include "sol/error.h"
#include "sol/activation.h"
#include "sol/gemm.h"
#include "sol/hw.h"
#include "sol/norm.h"
#include "sol/quant.h"
#include "sol/rope.h"
#include "sol/softmax.h"
#include "sol/tensor.h"

namespace sol {

struct TuneWorkspace {
  std::vector<Buffer> buffers;
  Tensor add(DType t, std::initializer_list<int64_t> shape, uint64_t seed) {
    buffers.emplace_back(t, shape);
    fill_random(buffers.back(), seed, 1.0);
    return buffers.back();
  }
};

namespace {

// Output sizes of the stream case: from 512 KiB, or the largest power of two in half of a
// smaller L2 (a chain of three in L2, where plain stores win), up to the first power of two
// whose chain of three buffers is past the reported LLC, at least 64 MiB, at most 256 MiB
// (768 MiB of buffers).
std::vector<int64_t> stream_sizes() {
  int64_t top = 64L << 20;
  while (top < (256L << 20) && 3 * top <= core_shape().l3_bytes) top *= 2;
  int64_t bottom = 512L << 10;
  while (bottom > (64L << 10) && bottom > core_shape().l2_bytes / 2) bottom /= 2;
  std::vector<int64_t> sizes;
  for (int64_t s = bottom; s <= top; s *= 2) sizes.push_back(s);
  return sizes;
}

}  // namespace

std::vector<int64_t> tune_candidates(const std::string& param) {
  if (param == "gemm_mc") return {96, 192, 240, 384, 768};
  if (param == "gemm_nc") return {512, 1024, 2048, 4096};
  if (param == "gemm_amx_mc") return {64, 128, 256, 384, 512};
  if (param == "gemm_b_prefetch_bytes") return {4096, 8192, 16384, 32768};
  if (param == "stream_min_bytes") {
    std::vector<int64_t> c = stream_sizes();
    c.push_back(int64_t(1) << 40);  // never stream
    return c;
  }
  if (param == "softmax_pipeline_min_rows") return {2, 8, 16, 32, 64};
  // The look-ahead ranges reach past the defaults' rules by 4-8x: a core whose one thread sees a
  // long memory latency (a loaded guest) may need far more in flight than its L1 suggests.
  if (param == "row_prefetch_bytes") return {0, 512, 1024, 2048, 4096, 8192, 16384, 32768};
  if (param == "pass_prefetch_bytes") return {0, 2048, 4096, 8192, 16384, 32768, 65536};
  if (param == "pass_l2_prefetch_bytes") return {0, 8192, 16384, 32768, 65536, 131072};
  if (param == "cast_l2_prefetch_bytes") return {0, 8192, 16384, 32768, 65536, 131072};
  if (param == "rope_pair_tokens") return {0, 1};
  if (param == "rope_prefetch_heads") return {4, 8, 16, 32, 64, 128, 256};
  if (param == "rope_l2_prefetch_heads") return {0, 32, 64, 128, 192, 256};
  if (param == "quant_pipeline_groups") return {1, 2, 3, 4};
  fail("sol tune", "no candidates for parameter '", param, "'");
}

namespace {

// Prefill: 480 rows (several MC blocks at most candidates), K = 4096 bf16 (two K blocks), N =
// 4096 (1 to 8 NC blocks): ~16 GFLOP, tens of milliseconds a run.
void add_gemm(TuneWorkspace& w, std::vector<TuneCase>& out) {
  const Tensor a = w.add(DType::bf16, {480, 4096}, 1), b = w.add(DType::bf16, {4096, 4096}, 2);
  const Tensor d = w.add(DType::f32, {480, 4096}, 3);
  auto run = [a, b, d] { gemm(a, b, d); };
  const std::string shape = "gemm bf16 480x4096x4096";
  for (const char* param : {"gemm_mc", "gemm_nc"}) out.push_back({param, tune_candidates(param), shape, run});
  // The same shape runs on the AMX tiles where the core has them; elsewhere MC for AMX moves nothing.
  if (cpu_features().best_isa >= Isa::amx) out.push_back({"gemm_amx_mc", tune_candidates("gemm_amx_mc"), shape, run});
  // Decode: 16 rows against a pre-packed 7168 x 2048 bf16 B (28 MiB, streamed once a call).
  const Tensor x = w.add(DType::bf16, {16, 2048}, 4), wt = w.add(DType::bf16, {7168, 2048}, 5);
  const Tensor y = w.add(DType::f32, {16, 7168}, 6);
  auto packed = std::make_shared<PackedMatrix>(pack_b(wt, Layout::nt));
  out.push_back({"gemm_b_prefetch_bytes", tune_candidates("gemm_b_prefetch_bytes"), "gemm bf16 16x7168x2048 packed",
                 [x, packed, y] { gemm(x, *packed, y); }});
}

// Chains of copies a -> b -> c -> a at each size, each copy reading what the one before wrote,
// as a layer's ops read their producer's output: while the three buffers stay cached, plain
// stores win (streaming sends the consumer to DRAM); once they do not, streaming does (no read
// for ownership). The same bytes at every size (at least one turn of the chain), so each size
// weighs alike and the threshold that minimises the sum is where streaming stops losing. The
// largest chain is past the reported LLC; where the host's other tenants take most of it (a
// guest), the crossover comes far below and the tune sees it.
void add_stream(TuneWorkspace& w, std::vector<TuneCase>& out) {
  constexpr int64_t bytes_per_size = 64L << 20;
  struct Chain {
    Tensor a, b, c;
    int turns;
  };
  std::vector<Chain> chains;
  for (int64_t s : stream_sizes())
    chains.push_back({w.add(DType::f32, {s / 4}, 7), w.add(DType::f32, {s / 4}, 8), w.add(DType::f32, {s / 4}, 9),
                      int(std::max<int64_t>(1, bytes_per_size / (3 * s)))});
  const std::string sizes = std::to_string(stream_sizes().front() >> 10) + " KiB .. " +
                            std::to_string(stream_sizes().back() >> 20) + " MiB";
  out.push_back({"stream_min_bytes", tune_candidates("stream_min_bytes"),
                 "copy chains a -> b -> c -> a of f32, " + sizes + ", 64 MiB copied at each", [chains] {
                   for (const Chain& ch : chains)
                     for (int t = 0; t < ch.turns; ++t) {
                       copy(ch.a, ch.b);
                       copy(ch.b, ch.c);
                       copy(ch.c, ch.a);
                     }
                 }});
}

// One thread's share of a decode-sized softmax (16 to 64 rows of 7168 bf16), out of place.
void add_softmax(TuneWorkspace& w, std::vector<TuneCase>& out) {
  std::vector<std::pair<Tensor, Tensor>> pairs;
  for (int64_t rows : {16, 24, 48, 64}) pairs.push_back({w.add(DType::bf16, {rows, 7168}, 9), w.add(DType::bf16, {rows, 7168}, 10)});
  out.push_back({"softmax_pipeline_min_rows", tune_candidates("softmax_pipeline_min_rows"), "softmax bf16 16..64 x 7168, 8 times", [pairs] {
                   for (int rep = 0; rep < 8; ++rep)
                     for (const auto& [x, y] : pairs) softmax(x, y);
                 }});
}

// Runs f with every output streamed (the threshold at its least): the look-aheads that run only
// where an output streams (the casts', the token quant's L2 one) then run whatever the sizes.
template <class F>
void with_streamed_outputs(F&& f) {
  TuningParams p = tuning().params;
  p.stream_min_bytes = 64L << 10;
  const ScopedTuning streamed(p);
  f();
}

// The row kernels' look-ahead: row ops of 1024 x 7168 bf16 (14 MiB a tensor) on tensors taken
// from the cold rings, each parameter on the ops whose kernels use it.
void add_rows(TuneWorkspace& w, std::vector<TuneCase>& out) {
  constexpr int64_t rows = 1024, h = 7168;
  const int64_t ring = cold_ring_bytes(core_shape());
  auto in = std::make_shared<ColdRing>(ring, true), res = std::make_shared<ColdRing>(ring / 2, false);
  const Tensor wt = w.add(DType::bf16, {h}, 14), bias = w.add(DType::bf16, {h}, 15);  // small: cached in use too
  const std::string cold = ", tensors from a " + std::to_string(ring >> 20) + " MiB ring (LLC " +
                           std::to_string(core_shape().l3_bytes >> 20) + " MiB)";
  auto param = [&](const char* name, const std::string& workload, std::function<void()> run) {
    out.push_back({name, tune_candidates(name), workload + cold, std::move(run)});
  };
  param("row_prefetch_bytes", "silu-mul and softmax bf16 1024x7168", [=] {
    silu_mul(in->take(DType::bf16, {rows, 2 * h}), res->take(DType::bf16, {rows, h}));
    softmax(in->take(DType::bf16, {rows, h}), res->take(DType::bf16, {rows, h}));
  });
  param("pass_prefetch_bytes", "rmsnorm, quant-fp8 token and a streamed cast f32 -> bf16, 1024x7168", [=] {
    rmsnorm(in->take(DType::bf16, {rows, h}), wt, res->take(DType::bf16, {rows, h}));
    quant_fp8_per_token(in->take(DType::bf16, {rows, h}), res->take(DType::f8e4m3, {rows, h}),
                        res->take(DType::f32, {rows, h / 128}));
    with_streamed_outputs([&] { cast(in->take(DType::f32, {rows, h}), res->take(DType::bf16, {rows, h})); });
  });
  param("cast_l2_prefetch_bytes", "streamed casts f32 -> f8e4m3 and f32 -> bf16, 1024x7168", [=] {
    with_streamed_outputs([&] {
      cast(in->take(DType::f32, {rows, h}), res->take(DType::f8e4m3, {rows, h}));
      cast(in->take(DType::f32, {rows, h}), res->take(DType::bf16, {rows, h}));
    });
  });
  param("pass_l2_prefetch_bytes", "rmsnorm, layernorm and a streamed quant-fp8 token, bf16 1024x7168", [=] {
    rmsnorm(in->take(DType::bf16, {rows, h}), wt, res->take(DType::bf16, {rows, h}));
    layernorm(in->take(DType::bf16, {rows, h}), wt, &bias, res->take(DType::bf16, {rows, h}));
    with_streamed_outputs([&] {
      quant_fp8_per_token(in->take(DType::bf16, {rows, h}), res->take(DType::f8e4m3, {rows, h}),
                          res->take(DType::f32, {rows, h / 128}));
    });
  });
  // DeepSeek-V3's MLA slice: 64 of each head's 192 values, 128 heads, 256 tokens (12 MiB), in place.
  const Tensor pos = w.add(DType::i32, {256}, 0);
  for (int64_t t = 0; t < 256; ++t) pos.data_as<int32_t>()[t] = int32_t(t * 13 % 4096);
  auto table = std::make_shared<RopeTable>(deepseek_v3_rope(), 4096);
  for (const char* name : {"rope_pair_tokens", "rope_prefetch_heads", "rope_l2_prefetch_heads"})
    param(name, "rope bf16 256 tokens x 128 heads, 64 of 192",
          [=] { rope(in->take(DType::bf16, {256, 128, 192}), pos, *table, 128); });
  param("quant_pipeline_groups", "rmsnorm + fp8 quant bf16 1024x7168", [=] {
    rmsnorm_quant_fp8(in->take(DType::bf16, {rows, h}), wt, res->take(DType::f8e4m3, {rows, h}),
                      res->take(DType::f32, {rows, h / 128}));
  });
}

}  // namespace

TuneCases tune_cases(const std::string& family) {
  check(family.empty() || family == "gemm" || family == "stream" || family == "softmax" || family == "rows",
        "sol tune", "unknown family '", family, "': expected gemm, stream, softmax or rows");
  TuneCases c;
  c.inputs = std::make_shared<TuneWorkspace>();
  if (family.empty() || family == "gemm") add_gemm(*c.inputs, c.cases);
  if (family.empty() || family == "stream") add_stream(*c.inputs, c.cases);
  if (family.empty() || family == "softmax") add_softmax(*c.inputs, c.cases);
  if (family.empty() || family == "rows") add_rows(*c.inputs, c.cases);
  return c;
}

}  // namespace sol
