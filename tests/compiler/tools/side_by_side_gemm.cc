// Not part of the build (not a test_*.cc). Build against a configured tree, e.g.
//   g++ -std=c++20 -O2 -march=native -fopenmp -Iinclude -Isrc tests/compiler/tools/side_by_side_gemm.cc \
//       -o /tmp/side_by_side_gemm build/libsol.a -ldl -lpthread
// and run /tmp/side_by_side_gemm M N K REPS FILE.tile.... It prints thread CPU time (CLOCK_THREAD_CPUTIME_ID), alternating the two
// kernels in one process, which survives the shared machine's load far better than wall clock.
// Thread-CPU-time side by side: sol::gemm (bf16 x bf16 -> f32, nn) and DSL GEMM variants, 1 thread.
#include <time.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include "ops/common/fill.h"
#include "sol/gemm.h"
#include "sol/threads.h"
#include "sol/tile.h"
using namespace sol;
static double cpu() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
int main(int argc, char** argv) {
  const int64_t m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]), reps = atoi(argv[4]);
  set_num_threads(1);
  Buffer a(DType::bf16, {m, k}), b(DType::bf16, {k, n}), c(DType::f32, {m, n});
  fill_random(a, 1, 1.0); fill_random(b, 2, 1.0);
  std::vector<std::shared_ptr<const tile::Kernel>> ks; std::vector<std::string> names;
  for (int i = 5; i < argc; ++i) { std::ifstream in(argv[i]); std::ostringstream t; t << in.rdbuf(); ks.push_back(tile::compile(tile::parse(t.str(), argv[i]))); names.push_back(argv[i]); }
  std::vector<std::vector<double>> t(ks.size() + 1);
  for (int r = 0; r < reps; ++r) {
    double t0 = cpu(); gemm(a, b, c); t[0].push_back(cpu() - t0);
    for (size_t i = 0; i < ks.size(); ++i) { t0 = cpu(); (*ks[i])({a, b, c}); t[i + 1].push_back(cpu() - t0); }
  }
  const double fl = 2.0 * m * n * k;
  for (auto& v : t) std::sort(v.begin(), v.end());
  std::printf("M=%ld N=%ld K=%ld, 1 thread, %ld reps, thread CPU time: gemm min %.2f med %.2f ms (%.0f GFLOP/s)\n", m, n, k, reps, t[0][0]*1e3, t[0][reps/2]*1e3, fl/t[0][reps/2]/1e9);
  for (size_t i = 0; i < ks.size(); ++i) std::printf("  %-28s min %.2f med %.2f ms (%.0f GFLOP/s) = %.2f x gemm (min/min %.2f)\n", names[i].c_str(), t[i+1][0]*1e3, t[i+1][reps/2]*1e3, fl/t[i+1][reps/2]/1e9, t[0][reps/2]/t[i+1][reps/2], t[0][0]/t[i+1][0]);
}
