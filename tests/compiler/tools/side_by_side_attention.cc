// Not part of the build (not a test_*.cc). Build against a configured tree, e.g.
//   g++ -std=c++20 -O2 -march=native -fopenmp -Iinclude -Isrc tests/compiler/tools/side_by_side_attention.cc \
//       -o /tmp/side_by_side_attention build/libsol.a -ldl -lpthread
// and run /tmp/side_by_side_attention SQ HEADS REPS [FILE.tile] (no mask, [B, H, S, D] program)
// or /tmp/side_by_side_attention SQ HEADS REPS FILE.tile causal KV_HEADS (a causal GQA program
// with [B, G, R, S, D] queries, e.g. examples/tile/flash_attention_causal_gqa.tile).
// It prints thread CPU time (CLOCK_THREAD_CPUTIME_ID) of sol::flash_attention and the DSL
// kernel, 1 thread, alternating in one process, which survives the shared machine's load far
// better than wall clock. FLOPs count the unmasked work (causal: about half).
#include <time.h>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include <string>
#include "compiler/bench/dsl_flash_attention.h"
#include "ops/common/fill.h"
#include "sol/attention.h"
#include "sol/threads.h"
using namespace sol;
static double cpu() { timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
Tensor hm(const Buffer& b) { const Tensor t = b.tensor(); const int64_t sh[4] = {t.shape()[0], t.shape()[2], t.shape()[1], t.shape()[3]};
  const int64_t st[4] = {t.stride(0), t.stride(2), t.stride(1), t.stride(3)}; return Tensor(t.data(), t.dtype(), sh, st); }
Tensor grouped(const Buffer& b, int64_t g) { const Tensor t = b.tensor(); const int64_t r = t.shape()[2] / g;
  const int64_t sh[5] = {t.shape()[0], g, r, t.shape()[1], t.shape()[3]}; const int64_t st[5] = {t.stride(0), r * t.stride(2), t.stride(2), t.stride(1), t.stride(3)};
  return Tensor(t.data(), t.dtype(), sh, st); }
Tensor grouped_lse(const Buffer& b, int64_t g) { const Tensor t = b.tensor(); const int64_t r = t.shape()[1] / g;
  const int64_t sh[4] = {t.shape()[0], g, r, t.shape()[2]}; const int64_t st[4] = {t.stride(0), r * t.stride(1), t.stride(1), t.stride(2)};
  return Tensor(t.data(), t.dtype(), sh, st); }
int main(int argc, char** argv) {
  const int64_t sq = atoi(argv[1]), h = atoi(argv[2]), reps = atoi(argv[3]);
  const bool causal = argc > 5 && std::string(argv[5]) == "causal";
  const int64_t hkv = argc > 6 ? atoi(argv[6]) : h;
  set_num_threads(1);
  Buffer q(DType::bf16, {1, sq, h, 128}), k(DType::bf16, {1, sq, hkv, 128}), v(DType::bf16, {1, sq, hkv, 128}), o(DType::bf16, {1, sq, h, 128}), lse(DType::f32, {1, h, sq});
  fill_random(q, 1, 1.5); fill_random(k, 2, 1.5); fill_random(v, 3, 1.0);
  tile::Program prog = tile::dsl_flash_attention_bf16();
  if (argc > 4) { FILE* f = fopen(argv[4], "r"); std::string text; char buf[4096]; size_t n; while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n); fclose(f); prog = tile::parse(text, argv[4]); }
  auto kern = tile::compile(prog);
  std::vector<Tensor> args = {hm(q), hm(k), hm(v), hm(o), lse.tensor()};
  if (causal) args = {grouped(q, hkv), hm(k), hm(v), grouped(o, hkv), grouped_lse(lse, hkv)};
  AttentionOptions opt;
  opt.causal = causal;
  std::vector<double> a, d;
  for (int r = 0; r < reps; ++r) {
    double t0 = cpu(); flash_attention(q, k, v, o, lse, opt); double t1 = cpu(); (*kern)(args); double t2 = cpu();
    a.push_back(t1 - t0); d.push_back(t2 - t1);
  }
  std::sort(a.begin(), a.end()); std::sort(d.begin(), d.end());
  const double flops = 2.0 * sq * sq * h * 256 * (causal ? 0.5 : 1.0);
  std::printf("sq=%ld h=%ld kv_heads=%ld%s d=128 bf16, 1 thread, %ld reps, thread CPU time: attention min %.3f med %.3f ms (%.1f GFLOP/s) | dsl min %.3f med %.3f ms (%.1f GFLOP/s) | dsl/hand (median) %.2f\n",
    sq, h, hkv, causal ? " causal" : "", reps, a[0]*1e3, a[a.size()/2]*1e3, flops/a[a.size()/2]/1e9, d[0]*1e3, d[d.size()/2]*1e3, flops/d[d.size()/2]/1e9, a[a.size()/2]/d[d.size()/2]);
}
