// Context-parallel attention under mpirun, every variant (ring, all-gather KV, Ulysses): each
// rank's zig-zag shard of the output and its log-sum-exp, and of dq, dk, dv from the backward,
// must match single-rank flash attention (forward and backward) on the full sequence: f32
// within the rounding of the LSE merge and of f32 partial sums, bf16 within bf16 tolerance;
// causal and full, GQA and MQA, chunks of odd sizes, and bad input.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "../comm/mpi_check.h"
#include "sol/attention.h"
#include "sol/comm_window.h"
#include "sol/copy.h"
#include "sol/cp.h"
#include "sol/timing.h"

namespace {

using sol::Buffer;
using sol::DType;
using sol::comm::testing::Checker;

void fill(const sol::Tensor& t, uint64_t seed) {
  for (int64_t i = 0; i < t.numel(); ++i)
    sol::store_from_double(t.data(), t.dtype(), size_t(i), 0.5 * sol::comm::testing::input_value(seed, 0, i, true) / 8);
}

double rel_error(const sol::Tensor& a, const sol::Tensor& b) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = sol::load_as_double(a.data(), a.dtype(), size_t(i)), y = sol::load_as_double(b.data(), b.dtype(), size_t(i));
    diff += (x - y) * (x - y);
    norm += y * y;
  }
  return std::isfinite(diff) ? std::sqrt(diff / std::max(norm, 1e-30)) : 1e30;
}

// lse [B, H, S] seen as [B, S, H] (tokens on dim 1), so zig-zag sharding applies to it too.
sol::Tensor tokens_first(const sol::Tensor& lse) {
  const int64_t B = lse.shape(0), H = lse.shape(1), S = lse.shape(2);
  const int64_t shape[] = {B, S, H}, strides[] = {H * S, 1, S};
  return sol::Tensor(lse.data(), lse.dtype(), shape, strides);
}

struct Case {
  DType dt;
  bool causal;
  int64_t chunk, H, Hkv, D;
  bool want_lse = true;  // forward with an empty lse when false (the backward still gets one)
};

// The full-sequence problem on one rank and this rank's shards of its inputs and results.
struct Reference {
  Buffer qs, ks, vs, dos, os, lse_s, dqs, dks, dvs;
};

Reference make_reference(const sol::comm::Group& g, const Case& cs) {
  const int n = g.size(), me = g.rank();
  const int64_t B = 2, S = 2 * n * cs.chunk, S2 = 2 * cs.chunk;
  const DType dt = cs.dt;
  Buffer q(dt, {B, S, cs.H, cs.D}), k(dt, {B, S, cs.Hkv, cs.D}), v(dt, {B, S, cs.Hkv, cs.D}), o(dt, {B, S, cs.H, cs.D}),
      d_o(dt, {B, S, cs.H, cs.D}), lse(DType::f32, {B, cs.H, S}), dq(dt, {B, S, cs.H, cs.D}),
      dk(dt, {B, S, cs.Hkv, cs.D}), dv(dt, {B, S, cs.Hkv, cs.D});
  fill(q, 1);
  fill(k, 2);
  fill(v, 3);
  fill(d_o, 4);
  sol::AttentionOptions ao;
  ao.causal = cs.causal;
  sol::flash_attention(q, k, v, o, lse, ao);
  sol::flash_attention_backward(q, k, v, o, lse, d_o, dq, dk, dv, ao);
  Reference r{Buffer(dt, {B, S2, cs.H, cs.D}),    Buffer(dt, {B, S2, cs.Hkv, cs.D}), Buffer(dt, {B, S2, cs.Hkv, cs.D}),
              Buffer(dt, {B, S2, cs.H, cs.D}),    Buffer(dt, {B, S2, cs.H, cs.D}),   Buffer(DType::f32, {B, cs.H, S2}),
              Buffer(dt, {B, S2, cs.H, cs.D}),    Buffer(dt, {B, S2, cs.Hkv, cs.D}), Buffer(dt, {B, S2, cs.Hkv, cs.D})};
  const std::pair<const Buffer*, const Buffer*> pairs[] = {{&q, &r.qs},   {&k, &r.ks},   {&v, &r.vs},
                                                           {&d_o, &r.dos}, {&o, &r.os},   {&dq, &r.dqs},
                                                           {&dk, &r.dks},  {&dv, &r.dvs}};
  for (auto [full, shard] : pairs) sol::cp::zigzag_shard(*full, *shard, me, n);
  sol::cp::zigzag_shard(tokens_first(lse), tokens_first(r.lse_s), me, n);
  return r;
}

// Forward and backward of one variant against the single-rank reference.
void check_variant(const sol::comm::Group& g, Checker& c, const Case& cs, const Reference& r, sol::cp::Variant variant,
                   const sol::comm::Window* kv_window = nullptr) {
  const DType dt = cs.dt;
  const std::string name = std::string(sol::cp::variant_name(variant)) + (kv_window ? " in place" : "") + " " +
                           std::string(sol::dtype_name(dt)) +
                           (cs.causal ? " causal" : " full") + " S=" + std::to_string(2 * g.size() * cs.chunk) +
                           " H=" + std::to_string(cs.H) + "/" + std::to_string(cs.Hkv) + " D=" + std::to_string(cs.D);
  const sol::Tensor& qs = r.qs;
  Buffer os(dt, qs.shape()), lse_s(DType::f32, r.lse_s.tensor().shape()), dq(dt, qs.shape()),
      dk(dt, r.ks.tensor().shape()), dv(dt, r.vs.tensor().shape());
  for (const Buffer* b : {&os, &lse_s, &dq, &dk, &dv}) sol::comm::testing::poison(b->data(), b->bytes());
  sol::cp::RingAttentionOptions ro;
  ro.causal = cs.causal;
  ro.variant = variant;
  ro.kv_window = kv_window;
  const double tol = dt == DType::f32 ? 2e-5 : 2e-2;
  if (cs.want_lse) {
    sol::cp::ring_attention(r.qs, r.ks, r.vs, os, lse_s, g, ro);
    const double eo = rel_error(os, r.os), el = rel_error(lse_s, r.lse_s);
    c.expect(eo <= tol && el <= tol, name + " forward: relative error o " + std::to_string(eo) + ", lse " + std::to_string(el));
  } else {
    sol::cp::ring_attention(r.qs, r.ks, r.vs, os, sol::Tensor(), g, ro);
    const double eo = rel_error(os, r.os);
    c.expect(eo <= tol, name + " forward without lse: relative error o " + std::to_string(eo));
    sol::copy(r.lse_s, lse_s);
  }
  // The backward differentiates this variant's own forward outputs, as a training step would.
  sol::cp::ring_attention_backward(r.qs, r.ks, r.vs, os, lse_s, r.dos, dq, dk, dv, g, ro);
  const double eq = rel_error(dq, r.dqs), ek = rel_error(dk, r.dks), ev = rel_error(dv, r.dvs);
  const double btol = dt == DType::f32 ? 2e-5 : 1e-2;
  c.expect(eq <= btol && ek <= btol && ev <= btol, name + " backward: relative error dq " + std::to_string(eq) + ", dk " +
                                                        std::to_string(ek) + ", dv " + std::to_string(ev));
}

void run_case(const sol::comm::Group& g, Checker& c, const Case& cs) {
  const Reference r = make_reference(g, cs);
  for (sol::cp::Variant variant : {sol::cp::Variant::ring, sol::cp::Variant::all_gather_kv, sol::cp::Variant::ulysses})
    if (variant != sol::cp::Variant::ulysses ||
        (cs.H % g.size() == 0 && (cs.Hkv % g.size() == 0 || g.size() % cs.Hkv == 0)))
      check_variant(g, c, cs, r, variant);
  // The ring reading every K/V shard in place, through a window (one node). Twice: the window
  // is reused, and a call must not repack its region while a peer still reads the last one.
  if (g.num_nodes() == 1) {
    const sol::comm::Window w(g, r.ks.bytes() + r.vs.bytes() + 64 * size_t(g.rank()));  // regions of unequal size
    for (int rep = 0; rep < 2; ++rep) check_variant(g, c, cs, r, sol::cp::Variant::ring, &w);
  }
}

// Every rank must throw sol::Error (before any rank communicates).
template <class F>
void expect_error(Checker& c, const std::string& what, F&& f) {
  bool threw = false;
  try {
    f();
  } catch (const sol::Error&) {
    threw = true;
  }
  c.expect(threw, what + ": no sol::Error");
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Median over `reps` of the slowest rank's wall time and of the largest thread CPU time, and
// the least of the latter (on a guest shared with other builds the minimum is the run the
// neighbours disturbed least).
struct Times {
  double wall = 0, cpu = 0, cpu_min = 0;
};
Times time_it(const sol::comm::Group& g, int reps, const std::function<void()>& f) {
  std::vector<double> wall, cpu;
  for (int rep = 0; rep < reps; ++rep) {
    g.barrier();
    const double w0 = sol::now_seconds(), c0 = thread_cpu_seconds();
    f();
    double mine[2] = {sol::now_seconds() - w0, thread_cpu_seconds() - c0}, worst[2];
    MPI_Allreduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    wall.push_back(worst[0]);
    cpu.push_back(worst[1]);
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2], cpu.front()};
}

// `mpi_cp bench S D H [reps]`: every variant, forward and backward, per rank against
// single-rank flash attention (forward and backward) on the whole sequence (causal, bf16,
// B = 1), all ranks timing at once; wall and thread-CPU medians; the ring twice: passing K/V
// around, and reading it in place through a comm::Window (one node only). Not run by ctest.
int bench(const sol::comm::Group& g, int64_t S, int64_t D, int64_t H, int reps) {
  const int n = g.size(), me = g.rank();
  const DType dt = DType::bf16;
  Buffer q(dt, {1, S, H, D}), k(dt, {1, S, H, D}), v(dt, {1, S, H, D}), o(dt, {1, S, H, D}), d_o(dt, {1, S, H, D}),
      lse(DType::f32, {1, H, S}), dq(dt, {1, S, H, D}), dk(dt, {1, S, H, D}), dv(dt, {1, S, H, D});
  fill(q, 1);
  fill(k, 2);
  fill(v, 3);
  fill(d_o, 4);
  const int64_t S2 = S / n;
  Buffer qs(dt, {1, S2, H, D}), ks(dt, {1, S2, H, D}), vs(dt, {1, S2, H, D}), os(dt, {1, S2, H, D}),
      dos(dt, {1, S2, H, D}), lse_s(DType::f32, {1, H, S2}), dqs(dt, {1, S2, H, D}), dks(dt, {1, S2, H, D}),
      dvs(dt, {1, S2, H, D});
  sol::cp::zigzag_shard(q, qs, me, n);
  sol::cp::zigzag_shard(k, ks, me, n);
  sol::cp::zigzag_shard(v, vs, me, n);
  sol::cp::zigzag_shard(d_o, dos, me, n);
  sol::AttentionOptions ao;
  ao.causal = true;
  const Times fwd1 = time_it(g, reps, [&] { sol::flash_attention(q, k, v, o, lse, ao); });
  const Times bwd1 = time_it(g, reps, [&] { sol::flash_attention_backward(q, k, v, o, lse, d_o, dq, dk, dv, ao); });
  const double flops = 2.0 * 2.0 * double(S) * double(S + 1) / 2 * double(D) * double(H);  // causal half
  if (me == 0)
    std::printf("S=%lld D=%lld H=%lld bf16 causal, %d ranks, medians of %d (slowest rank)\n"
                "  1-rank flash attention fwd: wall %.1f ms cpu %.1f ms (min %.1f, %.1f GFLOP/s); bwd: wall %.1f ms cpu %.1f ms "
                "(min %.1f)\n",
                (long long)S, (long long)D, (long long)H, n, reps, fwd1.wall * 1e3, fwd1.cpu * 1e3, fwd1.cpu_min * 1e3,
                flops / fwd1.cpu_min / 1e9, bwd1.wall * 1e3, bwd1.cpu * 1e3, bwd1.cpu_min * 1e3);
  const sol::comm::Window kv_window(g, size_t(ks.bytes() + vs.bytes()));
  for (int run = 0; run < 4; ++run) {
    const sol::cp::Variant variant = run == 2 ? sol::cp::Variant::all_gather_kv
                                     : run == 3 ? sol::cp::Variant::ulysses
                                                : sol::cp::Variant::ring;
    if (variant == sol::cp::Variant::ulysses && H % n != 0) continue;
    sol::cp::RingAttentionOptions ro;
    ro.variant = variant;
    if (run == 1) ro.kv_window = &kv_window;  // the ring reading K/V in place
    sol::cp::RingAttentionStats stats;
    ro.stats = &stats;
    const Times f = time_it(g, reps, [&] { sol::cp::ring_attention(qs, ks, vs, os, lse_s, g, ro); });
    const double f_comm = stats.comm_s / reps;
    const sol::cp::RingAttentionStats f_stats = stats;
    stats = {};
    const Times b = time_it(g, reps, [&] { sol::cp::ring_attention_backward(qs, ks, vs, os, lse_s, dos, dqs, dks, dvs, g, ro); });
    const double b_comm = stats.comm_s / reps;
    if (run == 0)
      for (int r = 0; r < n; ++r) {
        g.barrier();
        if (r == me)
          std::printf("  ring rank %d: K/V shards wholly arrived by the end of their step's compute: fwd %d of %d, "
                      "bwd %d of %d\n",
                      me, f_stats.shards_arrived, f_stats.shards, stats.shards_arrived, stats.shards);
        std::fflush(stdout);
      }
    if (me == 0)
      std::printf("  %-13s fwd: wall %.1f ms cpu %.1f ms (min %.1f), comm calls %.1f ms; per-rank throughput vs 1 rank: "
                  "wall %.0f%%, cpu %.0f%%, cpu min %.0f%%\n"
                  "  %-13s bwd: wall %.1f ms cpu %.1f ms (min %.1f), comm calls %.1f ms; per-rank throughput vs 1 rank: "
                  "wall %.0f%%, cpu %.0f%%, cpu min %.0f%%\n",
                  run == 1 ? "ring in place" : sol::cp::variant_name(variant), f.wall * 1e3, f.cpu * 1e3, f.cpu_min * 1e3, f_comm * 1e3,
                  100 * fwd1.wall / n / f.wall, 100 * fwd1.cpu / n / f.cpu, 100 * fwd1.cpu_min / n / f.cpu_min, "",
                  b.wall * 1e3, b.cpu * 1e3, b.cpu_min * 1e3, b_comm * 1e3, 100 * bwd1.wall / n / b.wall,
                  100 * bwd1.cpu / n / b.cpu, 100 * bwd1.cpu_min / n / b.cpu_min);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if ((argc == 5 || argc == 6) && std::string(argv[1]) == "bench")
    return bench(sol::comm::Group::world(), std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]),
                 argc == 6 ? std::atoi(argv[5]) : 5);
  const sol::comm::Group& g = sol::comm::Group::world();
  Checker c(g.rank());
  try {
    const int n = g.size();
    for (bool causal : {true, false}) {
      run_case(g, c, {DType::f32, causal, 16, 2 * n, n, 32});
      run_case(g, c, {DType::bf16, causal, 24, 2 * n, n, 64});
    }
    run_case(g, c, {DType::f32, true, 5, 1, 1, 8, false});  // chunks not a multiple of any tile; MQA; no lse
    run_case(g, c, {DType::bf16, true, 7, 3, 1, 16});  // MQA: Ulysses copies the K/V head to every rank
    // Chunks long enough for the ring to cut its blocks into pieces (src/cp/ring_plan.h).
    run_case(g, c, {DType::f32, true, 600, n, n, 16});
    run_case(g, c, {DType::bf16, false, 300, n, 1, 16});
    run_case(g, c, {DType::f32, true, 16, 2 * n, 2, 32});  // Ulysses with K/V heads shared by ranks at n = 4
    Buffer q(DType::f32, {1, 6, 1, 8}), o(DType::f32, {1, 6, 1, 8}), lse(DType::f32, {1, 1, 6});
    Buffer q5(DType::f32, {1, 5, 1, 8}), o5(DType::f32, {1, 5, 1, 8});
    expect_error(c, "odd local length", [&] { sol::cp::ring_attention(q5, q5, q5, o5, sol::Tensor(), g); });
    expect_error(c, "backward without lse",
                 [&] { sol::cp::ring_attention_backward(q, q, q, o, sol::Tensor(), o, o, o, o, g); });
    expect_error(c, "dq of the wrong dtype", [&] {
      Buffer dq(DType::bf16, {1, 6, 1, 8});
      sol::cp::ring_attention_backward(q, q, q, o, lse, o, dq, o, o, g);
    });
    if (n > 1) {
      sol::cp::RingAttentionOptions ro;
      ro.variant = sol::cp::Variant::ulysses;
      expect_error(c, "ulysses with 1 head on several ranks", [&] { sol::cp::ring_attention(q, q, q, o, lse, g, ro); });
    }
    expect_error(c, "unknown variant name", [&] { sol::cp::parse_variant("tree"); });
    if (g.num_nodes() == 1) {
      sol::cp::RingAttentionOptions ro;
      const sol::comm::Window small(g, size_t(q.bytes()) * 2 - 1);  // one byte short of k|v
      ro.kv_window = &small;
      expect_error(c, "kv_window too small", [&] { sol::cp::ring_attention(q, q, q, o, lse, g, ro); });
      const sol::comm::Group other = g.split(0, g.rank());
      const sol::comm::Window elsewhere(other, size_t(q.bytes()) * 2);
      ro.kv_window = &elsewhere;
      expect_error(c, "kv_window of another group", [&] { sol::cp::ring_attention(q, q, q, o, lse, g, ro); });
    }
    expect_error(c, "H not a multiple of Hkv", [&] {
      Buffer q3(DType::f32, {1, 6, 3, 8}), k2(DType::f32, {1, 6, 2, 8}), o3(DType::f32, {1, 6, 3, 8});
      sol::cp::ring_attention(q3, k2, k2, o3, sol::Tensor(), g);
    });
  } catch (const std::exception& e) {
    c.expect(false, std::string("exception: ") + e.what());
  }
  return c.finish("mpi_cp");
}
