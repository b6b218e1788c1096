// A whole DeepSeek-style MoE layer over expert parallelism, end to end:
//   route (moe_routing) → low_latency_dispatch → grouped_gemm_masked (gate/up) → silu_mul
//   (+ fp8 quant) → grouped_gemm_masked (down) → low_latency_combine (weighted) → + shared expert.
// The dispatch output is the masked layout the grouped GEMM reads: no reshuffle copy.
//
//   mpirun -np N moe_layer                 check against a single-process fp64 reference of
//                                          the same layer (bf16: rel. error < 1e-2; fp8:
//                                          DeepGEMM's diff < 1e-3), small shapes; exit 1 on failure
//   mpirun -np N moe_layer --bench [--fp8] [--tokens T] [--experts E] [--iters N]
//                                          per-stage median times, floors and the layer's SOL%
//                                          (hidden 7168, intermediate 2048, top-8, one shared expert)
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sol/activation.h"
#include "sol/comm.h"
#include "sol/comm_bench.h"
#include "sol/ep.h"
#include "sol/gemm.h"
#include "sol/hw.h"
#include "sol/quant.h"
#include "sol/routing.h"
#include "sol/timing.h"

using namespace sol;

namespace {

struct Dims {
  int64_t tokens = 24, hidden = 256, inter = 128, shared_inter = 128, experts = 0, top_k = 4;
  bool fp8 = false;
};

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDull;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ull;
  return x ^ (x >> 33);
}
// Uniform in [-scale, scale], the same on every rank for (stream, index).
float uniform(uint64_t stream, uint64_t i, float scale) {
  return scale * (float(mix(stream * 0x9E3779B97F4A7C15ull + i) >> 40) / float(1 << 24) * 2.0f - 1.0f);
}

std::vector<uint16_t> bf16_values(uint64_t stream, int64_t n, float scale) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = f32_to_bf16(uniform(stream, uint64_t(i), scale));
  return v;
}

// Expert weights in DeepGEMM's layout: w13 [E, 2I, H] (gate rows, then up rows), w2 [E, H, I];
// fp8 adds per-128×128-block scales. `value` gives the weight the reference must use.
struct ExpertWeights {
  int64_t E = 0, N = 0, K = 0;
  std::vector<uint16_t> bf16;
  std::vector<uint8_t> q;
  std::vector<float> scales;
  bool fp8 = false;
  ExpertWeights(uint64_t stream, int64_t first, int64_t count, int64_t n, int64_t k, bool use_fp8)
      : E(count), N(n), K(k), fp8(use_fp8) {
    bf16.resize(size_t(E * N * K));
    for (int64_t e = 0; e < E; ++e) {
      std::vector<uint16_t> one = bf16_values(stream * 1000 + uint64_t(first + e), N * K, 1.7f / std::sqrt(float(K)));
      std::copy(one.begin(), one.end(), bf16.begin() + e * N * K);
    }
    if (!fp8) return;
    const int64_t sn = (N + 127) / 128, sk = K / 128;
    q.resize(bf16.size());
    scales.resize(size_t(E * sn * sk));
    for (int64_t e = 0; e < E; ++e)
      quant_fp8_per_block(Tensor(bf16.data() + e * N * K, DType::bf16, {N, K}), Tensor(q.data() + e * N * K, DType::f8e4m3, {N, K}),
                          Tensor(scales.data() + e * sn * sk, DType::f32, {sn, sk}));
  }
  // Each expert packed once, as a model loads its weights (a plain B would be packed again on
  // every call); fp8 stays fp8 with its scales.
  std::vector<PackedMatrix> packed;
  void pack() {
    for (int64_t e = 0; e < E; ++e) {
      Tensor s = fp8 ? Tensor(scales.data() + e * ((N + 127) / 128) * (K / 128), DType::f32, {(N + 127) / 128, K / 128})
                     : Tensor();
      Tensor w = fp8 ? Tensor(q.data() + e * N * K, DType::f8e4m3, {N, K}) : Tensor(bf16.data() + e * N * K, DType::bf16, {N, K});
      packed.push_back(pack_b(w, Layout::nt, fp8 ? &s : nullptr));
    }
  }
  double value(int64_t e, int64_t n, int64_t k) const {
    const size_t i = size_t((e * N + n) * K + k);
    if (!fp8) return bf16_to_f32(bf16[i]);
    const int64_t sn = (N + 127) / 128, sk = K / 128;
    return double(e4m3_to_f32(q[i])) * scales[size_t((e * sn + n / 128) * sk + k / 128)];
  }
};

double silu(double g) { return g / (1 + std::exp(-g)); }

struct Stage {
  explicit Stage(const char* n) : name(n) {}
  const char* name;
  double flops = 0, bytes = 0, link_bytes = 0;
  std::vector<double> times;
};

}  // namespace

int main(int argc, char** argv) {
  const comm::Group& world = comm::Group::world();
  const int R = world.size(), me = world.rank();
  Dims d;
  bool bench = false;
  int iters = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoll(argv[++i]) : 0; };
    if (a == "--bench") bench = true, d.tokens = 32, d.hidden = 7168, d.inter = 2048, d.shared_inter = 2048, d.top_k = 8;
    else if (a == "--fp8") d.fp8 = true;
    else if (a == "--tokens") d.tokens = next();
    else if (a == "--experts") d.experts = next();
    else if (a == "--iters") iters = int(next());
    else {
      if (me == 0) std::fprintf(stderr, "moe_layer: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  if (d.experts == 0) d.experts = bench ? 16 * R : 4 * R;
  const int64_t T = d.tokens, H = d.hidden, I = d.inter, Is = d.shared_inter, E = d.experts, K = d.top_k;
  const int64_t L = E / R, slots = R * T;

  // Inputs and weights (this rank's experts; the reference regenerates any expert).
  std::vector<uint16_t> x = bf16_values(100 + uint64_t(me), T * H, 1.0f);
  std::vector<uint16_t> router = bf16_values(7, E * H, 1.0f / std::sqrt(float(H)));
  ExpertWeights w13(11, me * L, L, 2 * I, H, d.fp8), w2(13, me * L, L, H, I, d.fp8);
  w13.pack();
  w2.pack();
  ExpertWeights shared13(17, 0, 1, 2 * Is, H, false), shared2(19, 0, 1, H, Is, false);

  // Buffers, all taken once.
  const double copy_ceiling = bench ? comm::interprocess_copy_ceiling(world, size_t(T * K * H * 2), 5, 3) : 0;
  ep::BufferConfig cfg;
  cfg.hidden = H;
  cfg.num_experts = E;
  cfg.top_k = K;
  cfg.dtype = d.fp8 ? DType::f8e4m3 : DType::bf16;
  cfg.max_tokens_per_rank = 0;
  cfg.low_latency_max_tokens = T;
  ep::Buffer buffer(world, cfg);
  std::vector<float> logits(size_t(T * E)), topk_w(size_t(T * K));
  std::vector<int32_t> topk_idx(size_t(T * K));
  std::vector<uint16_t> gate_up(size_t(L * slots * 2 * I)), act(size_t(L * slots * I)), y(size_t(L * slots * H));
  std::vector<uint8_t> act_q(size_t(L * slots * I));
  std::vector<float> act_scales(size_t(L * slots * (I / 128 > 0 ? I / 128 : 1)));
  std::vector<uint16_t> out(size_t(T * H)), sh_gate_up(size_t(T * 2 * Is)), sh_act(size_t(T * Is));
  Tensor xt(x.data(), DType::bf16, {T, H}), outt(out.data(), DType::bf16, {T, H});
  RoutingOptions ropt;
  ropt.top_k = K;
  ep::LowLatencyHandle handle;

  Stage st[] = {Stage("route"), Stage("dispatch"), Stage("gemm gate/up"), Stage("silu_mul"), Stage("gemm down"),
                Stage("combine"), Stage("shared expert")};
  double rows_recv = 0;
  auto timed = [&](int s, auto&& fn) {
    const double t0 = now_seconds();
    fn();
    st[s].times.push_back(now_seconds() - t0);
  };
  auto layer = [&] {
    timed(0, [&] {
      gemm(xt, Tensor(router.data(), DType::bf16, {E, H}), Tensor(logits.data(), DType::f32, {T, E}),
           GemmOptions{.layout = Layout::nt});
      moe_routing(Tensor(logits.data(), DType::f32, {T, E}), Tensor(topk_idx.data(), DType::i32, {T, K}),
                  Tensor(topk_w.data(), DType::f32, {T, K}), ropt);
    });
    ep::LowLatencyResult r;
    timed(1, [&] { r = buffer.low_latency_dispatch(xt, Tensor(topk_idx.data(), DType::i32, {T, K}), handle); });
    const Tensor& count = r.recv_count;
    rows_recv = 0;
    for (int64_t e = 0; e < L; ++e) rows_recv += count.data_as<int32_t>()[e];
    timed(2, [&] {
      GroupedGemmOptions o;
      if (d.fp8) o.a_scales = &r.recv_x_scales;
      grouped_gemm_masked(r.recv_x, w13.packed, count, Tensor(gate_up.data(), DType::bf16, {L, slots, 2 * I}), o);
    });
    timed(3, [&] {
      for (int64_t e = 0; e < L; ++e) {
        const int64_t m = count.data_as<int32_t>()[e];
        Tensor gu = Tensor(gate_up.data() + e * slots * 2 * I, DType::bf16, {m, 2 * I});
        if (d.fp8)
          silu_mul_quant_fp8(gu, Tensor(act_q.data() + e * slots * I, DType::f8e4m3, {m, I}),
                             Tensor(act_scales.data() + e * slots * (I / 128), DType::f32, {m, I / 128}));
        else
          silu_mul(gu, Tensor(act.data() + e * slots * I, DType::bf16, {m, I}));
      }
    });
    timed(4, [&] {
      GroupedGemmOptions o;
      Tensor as(act_scales.data(), DType::f32, {L, slots, I / 128});
      if (d.fp8) o.a_scales = &as;
      Tensor a = d.fp8 ? Tensor(act_q.data(), DType::f8e4m3, {L, slots, I}) : Tensor(act.data(), DType::bf16, {L, slots, I});
      grouped_gemm_masked(a, w2.packed, count, Tensor(y.data(), DType::bf16, {L, slots, H}), o);
    });
    timed(5, [&] {
      buffer.low_latency_combine(Tensor(y.data(), DType::bf16, {L, slots, H}), Tensor(topk_idx.data(), DType::i32, {T, K}),
                                 Tensor(topk_w.data(), DType::f32, {T, K}), handle, outt);
    });
    timed(6, [&] {
      gemm(xt, Tensor(shared13.bf16.data(), DType::bf16, {2 * Is, H}), Tensor(sh_gate_up.data(), DType::bf16, {T, 2 * Is}),
           GemmOptions{.layout = Layout::nt});
      silu_mul(Tensor(sh_gate_up.data(), DType::bf16, {T, 2 * Is}), Tensor(sh_act.data(), DType::bf16, {T, Is}));
      gemm(Tensor(sh_act.data(), DType::bf16, {T, Is}), Tensor(shared2.bf16.data(), DType::bf16, {H, Is}), outt,
           GemmOptions{.beta = 1.0f, .layout = Layout::nt});
    });
  };

  if (!bench) {
    layer();
    // Reference in fp64 from the same routing: Σ_j w_j · down_e(silu(gate)·up) + shared(x).
    double diff = 0, norm = 0, dot = 0, sq = 0;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> ref(static_cast<size_t>(H), 0.0);
      auto expert = [&](const ExpertWeights& a, const ExpertWeights& b, int64_t e, int64_t inter, double weight) {
        std::vector<double> h(static_cast<size_t>(inter));
        for (int64_t n = 0; n < inter; ++n) {
          double g = 0, u = 0;
          for (int64_t k = 0; k < H; ++k) {
            const double xv = bf16_to_f32(x[size_t(t * H + k)]);
            g += xv * a.value(e, n, k);
            u += xv * a.value(e, inter + n, k);
          }
          h[size_t(n)] = silu(g) * u;
        }
        for (int64_t n = 0; n < H; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < inter; ++k) acc += h[size_t(k)] * b.value(e, n, k);
          ref[size_t(n)] += weight * acc;
        }
      };
      for (int64_t j = 0; j < K; ++j) {
        const int32_t e = topk_idx[size_t(t * K + j)];
        if (e < 0) continue;
        ExpertWeights a(11, e, 1, 2 * I, H, d.fp8), b(13, e, 1, H, I, d.fp8);
        expert(a, b, 0, I, topk_w[size_t(t * K + j)]);
      }
      expert(shared13, shared2, 0, Is, 1.0);
      for (int64_t n = 0; n < H; ++n) {
        const double o = bf16_to_f32(out[size_t(t * H + n)]), r = ref[size_t(n)];
        diff += (o - r) * (o - r);
        norm += r * r;
        dot += o * r;
        sq += o * o + r * r;
      }
    }
    double sums[4] = {diff, norm, dot, sq}, all[4];
    MPI_Allreduce(sums, all, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const double rel = std::sqrt(all[0] / all[1]), deepgemm_diff = 1 - 2 * all[2] / all[3];
    const bool ok = std::isfinite(rel) && (d.fp8 ? deepgemm_diff < 1e-3 : rel < 1e-2);
    if (me == 0)
      std::printf("moe_layer %s, %d ranks: relative error %.3e, DeepGEMM diff %.3e: %s\n", d.fp8 ? "fp8" : "bf16", R, rel,
                  deepgemm_diff, ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
  }

  layer();  // warm-up
  for (auto& s : st) s.times.clear();
  for (int i = 0; i < iters; ++i) {
    world.barrier();
    layer();
  }
  // Floors: compute at the measured bf16 dot rate (every GEMM here runs on vdpbf16ps, fp8
  // widened), weights streamed once from DRAM, EP traffic at the inter-process copy ceiling.
  const double peak = measure_ceiling(Unit::dot_bf16, 1, 0.2).all_threads;
  const double dram = measure_ceiling(Unit::mem_read, 1, 0.2).all_threads;
  const double wb = d.fp8 ? 1 : 2, ab = d.fp8 ? 1 + 4.0 / 128 : 2;
  const double experts_used = double(L);  // with T·K·R choices over E experts every local expert is hit
  st[0].flops = 2.0 * T * E * H, st[0].bytes = double(E * H * 2 + T * H * 2);
  st[1].link_bytes = double(T * K) * H * ab;
  st[2].flops = 2.0 * rows_recv * 2 * I * H, st[2].bytes = experts_used * 2 * I * H * wb;
  st[3].bytes = rows_recv * (2 * I * 2 + I * ab);
  st[4].flops = 2.0 * rows_recv * H * I, st[4].bytes = experts_used * H * I * wb;
  st[5].link_bytes = double(T * K) * H * 2;
  st[6].flops = 2.0 * T * 3 * Is * H, st[6].bytes = 3.0 * Is * H * 2;
  double total_time = 0, total_floor = 0;
  if (me == 0)
    std::printf("# moe_layer %s: %d ranks, %lld tokens/rank, hidden %lld, inter %lld, %lld experts, top-%lld\n"
                "# peaks: bf16 dot %.1f GFLOP/s, DRAM read %.1f GB/s, inter-process copy %.1f GB/s (1 thread per rank)\n"
                "# %-14s %10s %10s %7s\n",
                d.fp8 ? "fp8" : "bf16", R, (long long)T, (long long)H, (long long)I, (long long)E, (long long)K, peak / 1e9,
                dram / 1e9, copy_ceiling / 1e9, "stage", "median us", "floor us", "SOL%");
  for (auto& s : st) {
    std::sort(s.times.begin(), s.times.end());
    double t = s.times[s.times.size() / 2], slowest = 0;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const double floor = std::max({s.flops / peak, s.bytes / dram, copy_ceiling > 0 ? s.link_bytes / copy_ceiling : 0.0});
    total_time += slowest;
    total_floor += floor;
    if (me == 0) std::printf("  %-14s %10.1f %10.1f %6.1f%%\n", s.name, slowest * 1e6, floor * 1e6, 100 * floor / slowest);
  }
  if (me == 0) std::printf("  %-14s %10.1f %10.1f %6.1f%%\n", "layer", total_time * 1e6, total_floor * 1e6, 100 * total_floor / total_time);
  return 0;
}
