// Ring attention under mpirun: each rank's zig-zag shard of the output (and its log-sum-exp)
// must match single-rank flash attention on the full sequence: f32 within the rounding of the
// LSE merge, bf16 within bf16 tolerance; causal and full, GQA, and bad shapes.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <vector>

#include "../comm/mpi_check.h"
#include "sol/attention.h"
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

void run_case(const sol::comm::Group& g, Checker& c, DType dt, bool causal, int64_t chunk, int64_t H, int64_t Hkv, int64_t D) {
  const int n = g.size(), me = g.rank();
  const int64_t B = 2, S = 2 * n * chunk, S2 = 2 * chunk;
  const std::string name = std::string("ring_attention ") + std::string(sol::dtype_name(dt)) + (causal ? " causal" : " full") +
                           " S=" + std::to_string(S) + " H=" + std::to_string(H) + "/" + std::to_string(Hkv);
  Buffer q(dt, {B, S, H, D}), k(dt, {B, S, Hkv, D}), v(dt, {B, S, Hkv, D}), o(dt, {B, S, H, D}), lse(DType::f32, {B, H, S});
  fill(q, 1);
  fill(k, 2);
  fill(v, 3);
  sol::AttentionOptions ao;
  ao.causal = causal;
  sol::flash_attention(q, k, v, o, lse, ao);
  Buffer qs(dt, {B, S2, H, D}), ks(dt, {B, S2, Hkv, D}), vs(dt, {B, S2, Hkv, D}), os(dt, {B, S2, H, D}),
      os_ref(dt, {B, S2, H, D}), lse_s(DType::f32, {B, H, S2}), lse_ref(DType::f32, {B, H, S2});
  sol::cp::zigzag_shard(q, qs, me, n);
  sol::cp::zigzag_shard(k, ks, me, n);
  sol::cp::zigzag_shard(v, vs, me, n);
  sol::cp::zigzag_shard(o, os_ref, me, n);
  // lse is [B, H, S]: shard along its last dim through a transposed view.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int part = 0; part < 2; ++part) {
        const int64_t from = (part == 0 ? me : 2 * n - 1 - me) * chunk;
        for (int64_t i = 0; i < chunk; ++i)
          lse_ref.tensor().data_as<float>()[(b * H + h) * S2 + part * chunk + i] = lse.tensor().data_as<float>()[(b * H + h) * S + from + i];
      }
  sol::comm::testing::poison(os.data(), os.bytes());
  sol::cp::RingAttentionOptions ro;
  ro.causal = causal;
  sol::cp::ring_attention(qs, ks, vs, os, lse_s, g, ro);
  const double tol = dt == DType::f32 ? 2e-5 : 2e-2;
  const double eo = rel_error(os, os_ref), el = rel_error(lse_s, lse_ref);
  c.expect(eo <= tol && el <= tol, name + ": relative error o " + std::to_string(eo) + ", lse " + std::to_string(el));
}

// `mpi_cp bench S D H`: ring attention per rank against single-rank flash attention on the full
// sequence (causal, bf16, B = 1), both timed on every rank at once; not run by ctest.
int bench(const sol::comm::Group& g, int64_t S, int64_t D, int64_t H) {
  const int n = g.size(), me = g.rank();
  Buffer q(DType::bf16, {1, S, H, D}), k(DType::bf16, {1, S, H, D}), v(DType::bf16, {1, S, H, D}), o(DType::bf16, {1, S, H, D});
  fill(q, 1);
  fill(k, 2);
  fill(v, 3);
  Buffer qs(DType::bf16, {1, S / n, H, D}), ks(DType::bf16, {1, S / n, H, D}), vs(DType::bf16, {1, S / n, H, D}),
      os(DType::bf16, {1, S / n, H, D});
  sol::cp::zigzag_shard(q, qs, me, n);
  sol::cp::zigzag_shard(k, ks, me, n);
  sol::cp::zigzag_shard(v, vs, me, n);
  sol::AttentionOptions ao;
  ao.causal = true;
  const sol::Tensor none;
  std::vector<double> single, ring;
  for (int rep = 0; rep < 3; ++rep) {
    g.barrier();
    double t0 = sol::now_seconds();
    sol::flash_attention(q, k, v, o, none, ao);
    double t1 = sol::now_seconds();
    g.barrier();
    double t2 = sol::now_seconds();
    sol::cp::ring_attention(qs, ks, vs, os, none, g);
    double t3 = sol::now_seconds();
    double mine[2] = {t1 - t0, t3 - t2}, worst[2];
    MPI_Allreduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    single.push_back(worst[0]);
    ring.push_back(worst[1]);
  }
  std::sort(single.begin(), single.end());
  std::sort(ring.begin(), ring.end());
  const double flops = 2.0 * 2.0 * double(S) * double(S) * double(D) * double(H) / 2;  // causal half
  if (me == 0)
    std::printf("ring_attention S=%lld D=%lld H=%lld bf16 causal, %d ranks: single-rank FA %.1f ms (%.1f GFLOP/s), ring %.1f ms "
                "(%.1f GFLOP/s per rank), per-rank throughput vs single rank %.0f%% (medians of 3)\n",
                (long long)S, (long long)D, (long long)H, n, single[1] * 1e3, flops / single[1] / 1e9, ring[1] * 1e3,
                flops / n / ring[1] / 1e9, 100 * (single[1] / n) / ring[1]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "bench")
    return bench(sol::comm::Group::world(), std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]));
  const sol::comm::Group& g = sol::comm::Group::world();
  Checker c;
  c.rank = g.rank();
  try {
    for (bool causal : {true, false}) {
      run_case(g, c, DType::f32, causal, 16, 2, 1, 32);
      run_case(g, c, DType::bf16, causal, 24, 4, 2, 64);
    }
    run_case(g, c, DType::f32, true, 5, 1, 1, 8);  // chunks not a multiple of any tile
    bool threw = false;
    try {
      Buffer q(DType::f32, {1, 5, 1, 8}), o(DType::f32, {1, 5, 1, 8});
      sol::cp::ring_attention(q, q, q, o, sol::Tensor(nullptr, DType::f32, {0}), g);
    } catch (const sol::Error&) {
      threw = true;
    }
    c.expect(threw, "odd local length: no sol::Error");
  } catch (const std::exception& e) {
    c.expect(false, std::string("exception: ") + e.what());
  }
  return c.finish("mpi_cp");
}
