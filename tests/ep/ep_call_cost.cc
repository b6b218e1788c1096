// ep_call_cost: the per-call cost of the low-latency dispatch and combine, call by call, as
// wall time and as CPU time of the calling thread. `sol comm bench` reports the mean call of a
// batch, which on a loaded guest is dominated by the few calls during which a peer was
// descheduled; the distribution shows the code path's own cost (min, median) apart from those.
//
//   mpirun -np 2 -x SOL_NUM_THREADS=1 build/bin/ep_call_cost [tokens=1] [calls=3000]
//
// Shape: hidden 7168, top-8 of 256 experts, as the bench.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sol/comm.h"
#include "sol/ep.h"
#include "sol/timing.h"

using namespace sol;

namespace {

void report(int rank, const char* what, int64_t tokens, std::vector<double> wall, std::vector<double> cpu) {
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  double mean = 0;
  for (double v : wall) mean += v;
  mean /= double(wall.size());
  auto at = [](const std::vector<double>& v, double q) { return v[size_t(q * double(v.size() - 1))] * 1e6; };
  std::printf("rank %d %-8s T=%lld: wall min %.1f median %.1f p90 %.1f p99 %.1f mean %.1f us | cpu min %.1f median %.1f p90 %.1f us\n",
              rank, what, (long long)tokens, at(wall, 0), at(wall, 0.5), at(wall, 0.9), at(wall, 0.99), mean * 1e6,
              at(cpu, 0), at(cpu, 0.5), at(cpu, 0.9));
}

}  // namespace

int main(int argc, char** argv) {
  const comm::Group& g = comm::Group::world();
  const int R = g.size(), me = g.rank();
  const int64_t H = 7168, E = 256, K = 8, T = argc > 1 ? std::atoll(argv[1]) : 1, L = E / R, slots = R * T;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 3000;
  if (T < 1 || calls < 1 || E % R) {
    std::fprintf(stderr, "usage: ep_call_cost [tokens >= 1] [calls >= 1] (ranks must divide 256)\n");
    return 2;
  }
  ep::BufferConfig cfg;
  cfg.hidden = H;
  cfg.num_experts = E;
  cfg.top_k = K;
  cfg.max_tokens_per_rank = 0;
  cfg.low_latency_max_tokens = T;
  ep::Buffer buf(g, cfg);
  std::vector<uint16_t> x(size_t(T * H), 0x3f80), out(size_t(T * H));
  std::vector<int32_t> idx(size_t(T * K));
  std::vector<float> w(size_t(T * K), 0.125f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < K; ++j) idx[size_t(t * K + j)] = int32_t((t * 37 + j * 31 + me * 7) % E);
  Tensor xt(x.data(), DType::bf16, {T, H}), it(idx.data(), DType::i32, {T, K}), wt(w.data(), DType::f32, {T, K});
  ep::LowLatencyHandle handle;
  ep::LowLatencyResult r = buf.low_latency_dispatch(xt, it, handle);
  std::vector<uint16_t> y(r.recv_x.data_as<uint16_t>(), r.recv_x.data_as<uint16_t>() + r.recv_x.numel());
  Tensor yt(y.data(), DType::bf16, {L, slots, H}), ot(out.data(), DType::bf16, {T, H});
  for (int kind = 0; kind < 2; ++kind) {
    std::vector<double> wall, cpu;
    g.barrier();
    for (int i = 0; i < calls; ++i) {
      const double w0 = now_seconds(), c0 = thread_cpu_seconds();
      if (kind == 0) buf.low_latency_dispatch(xt, it, handle);
      else buf.low_latency_combine(yt, it, wt, handle, ot);
      wall.push_back(now_seconds() - w0);
      cpu.push_back(thread_cpu_seconds() - c0);
    }
    report(me, kind == 0 ? "dispatch" : "combine", T, wall, cpu);
  }
  return 0;
}
