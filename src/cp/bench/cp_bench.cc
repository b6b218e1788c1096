// The sweep of `sol comm bench ring-attention` (see cp_bench.h).
#include "cp/bench/cp_bench.h"


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "comm/bench/agree.h"
#include "comm/bench/batch_timing.h"
#include "comm/group_state.h"
#include "sol/attention.h"
#include "sol/comm_window.h"
#include "sol/cp.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/threads.h"
#include "sol/timing.h"

namespace sol::comm {

namespace {

constexpr int64_t kDim = 128;
constexpr size_t kMinBytes = size_t(64) << 10, kMaxBytes = size_t(4) << 20;

double all_max(const Group& g, double mine) {
  return detail::max_over(g, mine);
}

double rel_error(const Tensor& a, const Tensor& b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = load_as_double(a.data(), a.dtype(), size_t(i)), y = load_as_double(b.data(), b.dtype(), size_t(i));
    diff += (x - y) * (x - y);
    norm += y * y;
  }
  return std::isfinite(diff) ? std::sqrt(diff / std::max(norm, 1e-30)) : 1e30;
}

void fill(const Tensor& t, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    store_from_double(t.data(), t.dtype(), size_t(i), double(int64_t(x >> 40) - (1ll << 23)) / double(1ll << 23));
  }
}

struct Row {
  int64_t S = 0;
  std::string variant;
  double time_s = 0, flops = 0, floor_s = 0, ceiling = 0, single_s = 0, comm_alone_s = 0, exposed_s = 0, error = 0;
  bool wrong = false;
  size_t bytes = 0;
  int shards = 0, arrived = 0;  // ring: K/V shards received over all ranks and timed calls, and
                                // how many had wholly arrived when their step's compute ended
};

// The transfers of one variant alone, on buffers of the sizes it moves.
std::function<void()> transfers_of(const Group& g, cp::Variant v, size_t kv_bytes, size_t q_bytes, size_t o_bytes,
                                   size_t lse_bytes, std::vector<Buffer>& keep) {
  const int n = g.size(), me = g.rank();
  auto bytes = [](const Buffer& b) { return Tensor(b.data(), DType::u8, {int64_t(b.bytes())}); };
  switch (v) {
    case cp::Variant::ring:
      keep.emplace_back(kv_bytes);
      keep.emplace_back(kv_bytes);
      return [&g, &keep, n, me, bytes] {
        for (int step = 0; step + 1 < n; ++step) {
          const P2POp ops[] = {{P2POp::send, bytes(keep[size_t(step % 2)]), (me + 1) % n},
                               {P2POp::recv, bytes(keep[size_t((step + 1) % 2)]), (me + n - 1) % n}};
          g.batch_isend_irecv(ops).wait();
        }
      };
    case cp::Variant::all_gather_kv:
      keep.emplace_back(kv_bytes * size_t(n));
      return [&g, &keep, me, kv_bytes, bytes] {
        const Tensor all = bytes(keep[0]);
        g.all_gather(all.slice(0, int64_t(kv_bytes) * me, int64_t(kv_bytes) * (me + 1)), all);
      };
    case cp::Variant::ulysses: {
      const size_t there = q_bytes + kv_bytes, back = o_bytes + lse_bytes;
      for (size_t b : {there, there, back, back}) keep.emplace_back(b);
      return [&g, &keep, bytes] {
        g.all_to_all(bytes(keep[0]), bytes(keep[1]));
        g.all_to_all(bytes(keep[2]), bytes(keep[3]));
      };
    }
  }
  return [] {};
}

std::vector<Row> run_point(const Group& g, const CommBenchOptions& o, size_t bytes) {
  const int n = g.size(), me = g.rank();
  const DType dt = o.dtype;
  const int64_t H = n, es = int64_t(dtype_size(dt));
  const int64_t S2 = std::max<int64_t>(2, int64_t(bytes) / (2 * H * kDim * es) / 2 * 2), S = S2 * n;
  const size_t kv_bytes = size_t(2 * S2 * H * kDim * es);
  Buffer q(dt, {1, S, H, kDim}), k(dt, {1, S, H, kDim}), v(dt, {1, S, H, kDim}), o_full(dt, {1, S, H, kDim});
  fill(q, 1);
  fill(k, 2);
  fill(v, 3);
  Buffer qs(dt, {1, S2, H, kDim}), ks(dt, {1, S2, H, kDim}), vs(dt, {1, S2, H, kDim}), os(dt, {1, S2, H, kDim}),
      os_ref(dt, {1, S2, H, kDim}), lse(DType::f32, {1, H, S2});
  cp::zigzag_shard(q, qs, me, n);
  cp::zigzag_shard(k, ks, me, n);
  cp::zigzag_shard(v, vs, me, n);

  const double pairs = double(S) * double(S + 1) / 2;  // causal
  const double flops = 2.0 * pairs * double(H) * double(2 * kDim) / n;
  const int iters = o.iters > 0 ? o.iters : int(std::clamp(0.05 / (flops / 50e9), 1.0, 100.0));
  const Unit unit = dt == DType::bf16 ? Unit::dot_bf16 : Unit::fma_f32;
  // Paired ceiling: every rank measures its core at once; the best rank's rate is the peak.
  const double peak = all_max(g, measure_ceiling(unit, num_threads(), 0.1).all_threads);

  AttentionOptions fa;
  fa.causal = true;
  flash_attention(q, k, v, o_full, Tensor(), fa);
  const double single = detail::time_batches(g, [&] { flash_attention(q, k, v, o_full, Tensor(), fa); }, iters, o.batches);
  cp::zigzag_shard(o_full, os_ref, me, n);

  std::vector<Row> rows;
  // The ring reading K/V in place needs a window over one node's ranks.
  std::optional<Window> kv_window;
  if (g.num_nodes() == 1) kv_window.emplace(g, kv_bytes);
  struct Run {
    cp::Variant variant;
    bool in_place;
  };
  std::vector<Run> runs = {{cp::Variant::ring, false}, {cp::Variant::all_gather_kv, false}, {cp::Variant::ulysses, false}};
  if (kv_window) runs.insert(runs.begin() + 1, {cp::Variant::ring, true});
  for (const auto [variant, in_place] : runs) {
    cp::RingAttentionOptions ro;
    ro.variant = variant;
    if (in_place) ro.kv_window = &*kv_window;
    Row r;
    r.S = S;
    r.variant = std::string(cp::variant_name(variant)) + (in_place ? "_in_place" : "");
    r.bytes = kv_bytes;
    r.flops = flops;
    r.ceiling = peak;
    r.floor_s = flops / peak;
    r.single_s = single;
    std::memset(os.data(), 0xFF, os.bytes());
    cp::ring_attention(qs, ks, vs, os, lse, g, ro);
    r.error = all_max(g, rel_error(os, os_ref));
    r.wrong = r.error > (dt == DType::f32 ? 2e-5 : 2e-2);
    cp::RingAttentionStats stats;
    ro.stats = &stats;
    std::vector<double> wall, compute;  // per call, this rank
    r.time_s = detail::time_batches(
        g,
        [&] {
          const double start = now_seconds(), computed = stats.compute_s;
          cp::ring_attention(qs, ks, vs, os, lse, g, ro);
          wall.push_back(now_seconds() - start);
          compute.push_back(stats.compute_s - computed);
        },
        iters, o.batches);
    // Exposed communication of a call: the slowest rank's wall time minus the most compute any
    // rank did. Time a rank spends waiting for a neighbour that computes longer is imbalance,
    // not communication; so is the rest of a call whose slowest rank was descheduled.
    std::vector<double> exposed;
    for (size_t i = 0; i < wall.size(); ++i) exposed.push_back(std::max(0.0, all_max(g, wall[i]) - all_max(g, compute[i])));
    std::sort(exposed.begin(), exposed.end());
    r.exposed_s = exposed[exposed.size() / 2];
    r.shards = int(detail::sum_over(g, stats.shards)), r.arrived = int(detail::sum_over(g, stats.shards_arrived));
    std::vector<Buffer> keep;
    // In place, the only "transfers" are packing this rank's shard into its region and the
    // two fences.
    const std::function<void()> alone =
        in_place ? std::function<void()>([&] {
          std::memcpy(kv_window->local(), ks.data(), ks.bytes());
          std::memcpy(kv_window->local() + ks.bytes(), vs.data(), vs.bytes());
          kv_window->fence();
          kv_window->fence();
        })
                 : transfers_of(g, variant, kv_bytes, size_t(qs.bytes()), size_t(os.bytes()), size_t(lse.bytes()), keep);
    r.comm_alone_s = detail::time_batches(g, alone, iters, o.batches);
    rows.push_back(r);
  }
  return rows;
}

double hidden_pct(const Row& r) {
  return r.comm_alone_s > 0 ? 100 * std::clamp(1 - r.exposed_s / r.comm_alone_s, 0.0, 1.0) : 0;
}

}  // namespace

bool is_cp_bench_op(std::string_view op) {
  for (const char* k : kCpBenchOps)
    if (op == k) return true;
  return false;
}

int64_t cp_bench(const Group& g, const CommBenchOptions& o, bool json) {
  check(is_cp_bench_op(o.op), "comm bench", "'", o.op, "' is not ring-attention");
  check(o.dtype == DType::f32 || o.dtype == DType::bf16, "comm bench", o.op, ": --dtype must be f32 or bf16, got ",
        dtype_name(o.dtype));
  check(o.min_bytes <= o.max_bytes, "comm bench", "--min-bytes ", o.min_bytes, " is above --max-bytes ", o.max_bytes);
  const size_t lo = std::clamp(o.min_bytes, kMinBytes, kMaxBytes), hi = std::clamp(o.max_bytes, kMinBytes, kMaxBytes);
  std::vector<Row> rows;
  for (size_t bytes = lo; bytes <= hi; bytes *= size_t(o.factor)) {
    for (Row& r : run_point(g, o, bytes)) rows.push_back(r);
    if (bytes > hi / size_t(o.factor)) break;
  }
  int64_t wrong = 0;
  for (const Row& r : rows) wrong += r.wrong;
  if (g.rank() != 0) return wrong;
  const std::string dtype(dtype_name(o.dtype));
  if (json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const Row& r : rows)
      arr.push_back({{"op", o.op},
                     {"variant", r.variant},
                     {"shape", "b=1,s=" + std::to_string(r.S) + ",h=" + std::to_string(g.size()) + ",d=128,causal"},
                     {"bytes", r.bytes},
                     {"dtype", dtype},
                     {"ranks", g.size()},
                     {"nodes", g.num_nodes()},
                     {"time_s", r.time_s},
                     {"flops", r.flops},
                     {"tflops", r.flops / r.time_s / 1e12},
                     {"bound", "compute"},
                     {"floor_s", r.floor_s},
                     {"sol_pct", 100 * r.floor_s / r.time_s},
                     {"single_rank_s", r.single_s},
                     {"vs_single_rank_pct", 100 * r.single_s / g.size() / r.time_s},
                     {"comm_alone_s", r.comm_alone_s},
                     {"comm_exposed_s", r.exposed_s},
                     {"hidden_pct", hidden_pct(r)},
                     {"shards", r.shards},
                     {"shards_arrived", r.arrived},
                     {"rel_error", r.error},
                     {"wrong", int(r.wrong)}});
    std::printf("%s\n", arr.dump(2).c_str());
    return wrong;
  }
  std::printf("# sol comm bench ring-attention: %d ranks on %d node(s), %d thread(s) per rank, B=1 H=%d D=128 causal %s\n",
              g.size(), g.num_nodes(), num_threads(), g.size(), dtype.c_str());
  std::printf("# %6s %-14s %9s %9s %8s %9s %6s %9s %7s %9s %9s %7s %9s %9s\n", "S", "variant", "kv/rank", "time(ms)",
              "GFLOP/s", "floor(ms)", "SOL%", "1rankFA", "vs-FA", "comm(ms)", "exposed", "hidden", "arrived", "rel.err");
  for (const Row& r : rows)
    std::printf("  %6lld %-14s %8zuK %9.2f %8.1f %9.2f %5.1f%% %9.2f %6.1f%% %9.3f %9.3f %6.1f%% %9s %9.1e%s\n",
                (long long)r.S, r.variant.c_str(), r.bytes >> 10, r.time_s * 1e3, r.flops / r.time_s / 1e9,
                r.floor_s * 1e3, 100 * r.floor_s / r.time_s, r.single_s * 1e3, 100 * r.single_s / g.size() / r.time_s,
                r.comm_alone_s * 1e3, r.exposed_s * 1e3, hidden_pct(r),
                r.shards > 0 ? (std::to_string(r.arrived) + "/" + std::to_string(r.shards)).c_str() : "-", r.error,
                r.wrong ? "  WRONG" : "");
  std::printf("# floor: FLOPs per rank / paired %s ceiling (best rank, %.1f GFLOP/s at the last size); vs-FA: per-rank\n"
              "# throughput against 1-rank flash attention on the whole sequence; comm: the transfers alone; exposed:\n"
              "# slowest rank's time minus the most compute of any rank, per call; hidden = 1 - exposed / comm;\n"
              "# arrived: ring K/V shards (all ranks, all timed calls) wholly received by the end of their step's compute\n",
              o.dtype == DType::bf16 ? "dot_bf16" : "fma_f32", rows.empty() ? 0.0 : rows.back().ceiling / 1e9);
  return wrong;
}

}  // namespace sol::comm
