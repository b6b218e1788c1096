// Sol's device GEMM beside its anchors on the GEMM table, for scripts/device-check.sh (not a test:
// `sol_gpu_tests bench_gemm`, never by ctest). Shapes: the layout-nt rows of bench/gemm_shapes.json
// (DeepSeek-V3 at M = 1, 16, 128, 4096, and the grouped MoE shapes in the contiguous and masked
// layouts), each in bf16 and in fp8 e4m3 with DeepGEMM's block scales; then its layout-nn squares
// in bf16 (B stored [K, N]; cuBLASLt in the same NN form). Anchors, in the same run on
// the same operands: cuBLASLt bf16 (TN, weights as stored) and cuBLASLt fp8 with the scaling its
// version offers on this device (named in every record: "block 1x128/128x128" or "per-tensor", the
// latter a cheaper product than Sol's); a grouped shape runs one cuBLASLt call per non-empty expert.
// Timed as gpu_bench.h says (events, L2 flushed, median of 21). Floor = max(FLOPs / the dtype's
// wgmma peak, bytes / HBM read), both measured by Sol's own loops before and after the table (the
// larger kept); bytes = A and B read once (empty experts' weights not counted), scales, D written.
// One 'BENCH {json}' line per implementation and shape (each also printed as 'BENCH-EARLY' as soon
// as its shape is timed, against the ceilings measured before the table); an anchor whose output
// differs from Sol's beyond bf16 rounding is marked "check": "FAIL" and the bench fails.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "device/gpu_ceilings.h"
#include "gpu_bench.h"
#include "gpu_gemm_data.h"
#include "gpu_test.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/cublaslt_anchor.h"
#include "sol/copy.h"
#include "sol/error.h"
#include "sol/gemm.h"

namespace sol {

namespace {

const Device kDev = Device::cuda(0);
constexpr int64_t kBlock = kFp8ScaleBlock;

struct Shape {
  std::string name;
  int64_t n, k;
  std::vector<int64_t> group_m;  // one entry: a plain GEMM
  std::string layout = "nt";     // nn: B stored [K, N] (the squares; bf16 only)
};

// bench/gemm_shapes.json's rows in the order issue 23 judges them: M = 4096 (the compute-bound
// targets), the grouped shapes, then M = 128, 16, 1 (memory-bound decode), then the nn squares,
// so a time budget cuts the least telling ones.
std::vector<Shape> table() {
  std::vector<Shape> t;
  const std::pair<const char*, std::pair<int64_t, int64_t>> dsv3[] = {
      {"qkv_a", {2112, 7168}}, {"q_b", {24576, 1536}}, {"kv_b", {32768, 512}},
      {"o", {7168, 16384}},    {"ffn_up", {4096, 7168}}, {"ffn_down", {7168, 2048}}};
  auto plain = [&](int64_t m) {
    for (const auto& [role, nk] : dsv3)
      t.push_back({"dsv3." + std::string(role) + ".m" + std::to_string(m), nk.first, nk.second, {m}});
  };
  plain(4096);
  const std::vector<int64_t> prefill{1024, 768, 0, 512, 896, 384, 256, 256}, decode{37, 0, 5, 22, 17, 1, 30, 16};
  t.push_back({"dsv3.moe_up.g8.m4096", 4096, 7168, prefill});
  t.push_back({"dsv3.moe_down.g8.m4096", 7168, 2048, prefill});
  t.push_back({"dsv3.moe_up.g8.m128", 4096, 7168, decode});
  t.push_back({"dsv3.moe_down.g8.m128", 7168, 2048, decode});
  for (int64_t m : {128, 16, 1}) plain(m);
  for (int64_t sq : {256, 512, 1024, 2048, 4096}) t.push_back({"square." + std::to_string(sq), sq, sq, {sq}, "nn"});
  return t;
}

struct Ceilings {
  double mma_bf16 = 0, mma_fp8 = 0, hbm_read = 0;
  void measure() {
    mma_bf16 = std::max(mma_bf16, measure_gpu_ceiling("mma_bf16", kDev, 0.2));
    mma_fp8 = std::max(mma_fp8, measure_gpu_ceiling("mma_fp8", kDev, 0.2));
    hbm_read = std::max(hbm_read, measure_gpu_ceiling("hbm_read", kDev, 0.2));
  }
};

struct Work {
  std::string op, shape, dims, dtype;
  double flops = 0, bytes = 0;
};

struct Result {
  std::string impl, detail, error;
  double time_s = 0;
  std::optional<double> rel_err;  // anchors: ||anchor - Sol|| / ||Sol||, where they compute the same product
};

int failures = 0;

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += (c == '\n' || c == '\r') ? ' ' : c;
  }
  return o;
}

// Each shape's records are printed as soon as it is timed, tagged BENCH-EARLY / TABLE-EARLY and
// held to the ceilings measured before the table ("ceilings": "before"), so a run cut short keeps
// them; the final BENCH / TABLE records follow the table, held to the best of the ceilings
// measured before and after it, then the line "bench_gemm: done" (scripts/device-check.sh takes
// the final records when it is there, the early ones otherwise).
struct Pending {
  Work w;
  std::vector<Result> results;
};
std::vector<Pending> pending;

void print_record(const Pending& p, const Ceilings& c, bool early) {
  const char* bench_tag = early ? "BENCH-EARLY" : "BENCH";
  const char* table_tag = early ? "TABLE-EARLY" : "TABLE";
  const char* close = early ? ", \"ceilings\": \"before\"}" : "}";
  const double peak = p.w.dtype == "bf16" ? c.mma_bf16 : c.mma_fp8;
  const double compute = peak > 0 ? p.w.flops / peak : 0, memory = c.hbm_read > 0 ? p.w.bytes / c.hbm_read : 0;
  const double floor = std::max(compute, memory);
  const char* bound = compute >= memory ? "compute" : "memory";
  double sol_time = 0;
  for (const Result& r : p.results)
    if (r.impl == "sol" && r.error.empty()) sol_time = r.time_s;
  std::string summary;
  char buf[512];
  for (const Result& r : p.results) {
    std::string line = std::string(bench_tag) + " {\"op\": \"" + p.w.op + "\", \"shape\": \"" + p.w.shape +
                       "\", \"dims\": \"" + p.w.dims + "\", \"dtype\": \"" + p.w.dtype + "\", \"impl\": \"" +
                       r.impl + "\", \"detail\": \"" + escape(r.detail) + "\"";
    if (!r.error.empty()) {
      line += ", \"error\": \"" + escape(r.error) + "\"" + close;
      summary += " | " + r.impl + ": " + r.error.substr(0, 80);
      std::printf("%s\n", line.c_str());
      continue;
    }
    std::snprintf(buf, sizeof buf,
                  ", \"time_s\": %.9g, \"flops\": %.6g, \"bytes\": %.6g, \"tflops\": %.1f, \"floor_s\": %.9g, "
                  "\"bound\": \"%s\", \"sol_pct\": %.1f, \"mma_peak_tflops\": %.1f, \"hbm_read_gbps\": %.1f",
                  r.time_s, p.w.flops, p.w.bytes, p.w.flops / r.time_s / 1e12, floor, bound,
                  100.0 * floor / r.time_s, peak / 1e12, c.hbm_read / 1e9);
    line += buf;
    if (r.impl != "sol" && sol_time > 0) {
      std::snprintf(buf, sizeof buf, ", \"anchor_time_over_sol\": %.3f", r.time_s / sol_time);
      line += buf;
    }
    if (r.rel_err) {
      std::snprintf(buf, sizeof buf, ", \"rel_err_vs_sol\": %.3g, \"check\": \"%s\"", *r.rel_err,
                    *r.rel_err <= 1e-2 ? "ok" : "FAIL");
      line += buf;
    }
    std::printf("%s%s\n", line.c_str(), close);
    std::snprintf(buf, sizeof buf, " | %s %.3f ms %.1f%%", r.impl.c_str(), r.time_s * 1e3, 100.0 * floor / r.time_s);
    summary += buf;
  }
  std::printf("%s %-24s %-4s %-23s floor %.3f ms (%s)%s\n", table_tag, p.w.shape.c_str(), p.w.dtype.c_str(),
              p.w.op.c_str(), floor * 1e3, bound, summary.c_str());
}

// Times `run` unless preparing or running it throws; the error is the record then.
Result timed(const std::string& impl, const std::function<std::string()>& prepare, const std::function<void()>& run,
             const DeviceBuffer& flush) {
  Result r;
  r.impl = impl;
  try {
    r.detail = prepare();
    run();
    synchronize(kDev);
    r.time_s = gpu_test::median_seconds(run, flush);
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

// ||x - y|| / ||y|| over the rows both wrote (bf16 device tensors of one shape, rows listed).
double relative_difference(const Tensor& x, const Tensor& y, const std::vector<std::pair<int64_t, int64_t>>& rows) {
  double num = 0, den = 0;
  for (auto [start, stop] : rows) {
    if (stop <= start) continue;
    const int64_t n = x.shape(-1);
    Buffer hx(DType::bf16, {stop - start, n}), hy(DType::bf16, {stop - start, n});
    Buffer fx(DType::f32, {stop - start, n}), fy(DType::f32, {stop - start, n});
    transfer(x.slice(0, start, stop), hx);
    transfer(y.slice(0, start, stop), hy);
    cast(hx, fx);
    cast(hy, fy);
    const float* a = fx.tensor().data_as<float>();
    const float* b = fy.tensor().data_as<float>();
    for (int64_t i = 0; i < fx.tensor().numel(); ++i) {
      num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      den += double(b[i]) * b[i];
    }
  }
  return den > 0 ? std::sqrt(num / den) : (num > 0 ? INFINITY : 0);
}

void note_check(Result& anchor, double err) {
  anchor.rel_err = err;
  if (!(err <= 1e-2)) {
    ++failures;
    std::fprintf(stderr, "FAIL: %s differs from Sol by %.3g\n", anchor.detail.c_str(), err);
  }
}

// Operands of one shape and dtype on the device, as the model holds them: A rows (per expert
// where grouped), B [G, N, K], Sol's block scales and the anchor's copies of them.
struct Operands {
  DType in;
  int64_t n, k, kb, nb;
  std::vector<int64_t> group_m;
  int64_t rows = 0;  // of A and D in the contiguous layout (each expert padded to 128 rows)
  Buffer a_host, sa_host;
  DeviceBuffer a, b, sa, sb;
  std::vector<Buffer> sb_host;  // per expert [nb, kb]

  Operands(DType in_, const Shape& s, uint64_t seed) : in(in_), n(s.n), k(s.k), group_m(s.group_m) {
    kb = k / kBlock;
    nb = (n + kBlock - 1) / kBlock;
    const int64_t g = int64_t(group_m.size());
    // Grouped: room for both layouts, each expert padded to 128 rows (contiguous) and G x max_m (masked).
    int64_t max_m = 0;
    for (int64_t m : group_m) rows += g == 1 ? m : (m + kBlock - 1) / kBlock * kBlock, max_m = std::max(max_m, m);
    if (g > 1) rows = std::max(rows, g * max_m);
    a_host = Buffer(in, {rows, k});
    fill_random(a_host, seed, 1.0);
    a = gpu_test::upload(a_host, kDev);
    Buffer b_host(in, {g, n, k});
    fill_random(b_host, seed + 1, 1.0);
    b = gpu_test::upload(b_host, kDev);
    if (in == DType::f8e4m3) {
      sa_host = gpu_test::random_host(DType::f32, rows, kb, seed + 2, 0.5f, 2.f);
      sa = gpu_test::upload(sa_host, kDev);
      Buffer all(DType::f32, {g, nb, kb});
      for (int64_t e = 0; e < g; ++e) {
        sb_host.push_back(gpu_test::random_host(DType::f32, nb, kb, seed + 3 + uint64_t(e), 0.5f, 2.f));
        transfer(sb_host.back(), all.tensor().slice(0, e, e + 1).reshape(std::vector<int64_t>{nb, kb}));
      }
      sb = gpu_test::upload(all, kDev);
    }
  }
  Tensor b_of(int64_t e) const { return b.tensor().slice(0, e, e + 1).reshape(std::vector<int64_t>{n, k}); }
  Tensor sb_of(int64_t e) const { return sb.tensor().slice(0, e, e + 1).reshape(std::vector<int64_t>{nb, kb}); }
};

// One cuBLASLt call per non-empty expert on the rows [start, start + m) of a and d; the anchor's
// scale copies are made and uploaded here, outside the timed runs.
struct AnchorCalls {
  std::vector<CublasLtGemm> gemms;
  std::vector<Tensor> a, b, d;
  std::vector<DeviceBuffer> sa, sb;
  std::string detail, fallback;  // fallback: the m of calls timed per-tensor instead of block-scaled
  CublasLtFp8Scaling requested = CublasLtFp8Scaling::none;
  std::string describe() const {
    if (fallback.empty()) return detail;
    return detail + " (per-tensor at m=" + fallback + ": no block-scaled algorithm)";
  }

  void add(const Operands& o, CublasLtFp8Scaling scaling, int64_t expert, int64_t start, int64_t m, const Tensor& a_rows,
           const Tensor& d_rows) {
    if (m == 0) return;
    requested = scaling;
    CublasLtGemm g(kDev, CublasLtProblem{o.in, m, o.n, o.k, scaling});
    // A shape block scaling has no algorithm for (m = 1 on an H100) is timed per-tensor, named so.
    if (!g.has_algorithm() && scaling == CublasLtFp8Scaling::block_1x128_128x128) {
      scaling = CublasLtFp8Scaling::per_tensor;
      g = CublasLtGemm(kDev, CublasLtProblem{o.in, m, o.n, o.k, scaling});
      if (!fallback.empty()) fallback += ',';
      fallback += std::to_string(m);
    }
    gemms.push_back(std::move(g));
    if (scaling == requested || detail.empty())
      detail = gemms.back().describe() + (o.group_m.size() > 1 ? ", one call per expert" : "");
    a.push_back(a_rows);
    b.push_back(o.b_of(expert));
    d.push_back(d_rows);
    if (scaling == CublasLtFp8Scaling::block_1x128_128x128) {
      sa.push_back(gpu_test::upload(cublaslt_a_block_scales(o.sa_host.tensor().slice(0, start, start + m)), kDev));
      sb.push_back(gpu_test::upload(cublaslt_b_block_scales(o.sb_host[size_t(expert)]), kDev));
    } else if (scaling == CublasLtFp8Scaling::per_tensor) {
      sa.push_back(gpu_test::upload_scalar(1.0f, kDev));
      sb.push_back(gpu_test::upload_scalar(1.0f, kDev));
    }
  }
  void run() const {
    for (size_t i = 0; i < gemms.size(); ++i)
      gemms[i].run(a[i], b[i], d[i], sa.empty() ? nullptr : &sa[i].tensor(), sb.empty() ? nullptr : &sb[i].tensor());
  }
};

double cost_bytes(const Operands& o, int64_t useful_rows, int64_t experts_used) {
  const double es = double(dtype_size(o.in));
  double bytes = double(useful_rows) * double(o.k) * es + double(experts_used) * double(o.n) * double(o.k) * es +
                 double(useful_rows) * double(o.n) * 2;
  if (o.in == DType::f8e4m3) bytes += 4.0 * (double(useful_rows) * double(o.kb) + double(experts_used * o.nb * o.kb));
  return bytes;
}

std::string dims_of(const Shape& s) {
  std::ostringstream os;
  if (s.group_m.size() > 1) os << "g" << s.group_m.size() << " m=[";
  else os << "m=";
  for (size_t i = 0; i < s.group_m.size(); ++i) os << (i ? "," : "") << s.group_m[i];
  os << (s.group_m.size() > 1 ? "]" : "") << ",n=" << s.n << ",k=" << s.k << "," << s.layout;
  return os.str();
}

void bench_plain(const Shape& s, DType in, CublasLtFp8Scaling scaling, const DeviceBuffer& flush) {
  const int64_t m = s.group_m[0];
  Operands o(in, s, 100);
  DeviceBuffer d_sol(kDev, DType::bf16, {m, s.n}), d_anchor(kDev, DType::bf16, {m, s.n});
  Pending p;
  p.w = {"gemm", s.name, dims_of(s), in == DType::bf16 ? "bf16" : "fp8", 2.0 * double(m) * double(s.n) * double(s.k),
         cost_bytes(o, m, 1)};
  GemmOptions opt;
  opt.layout = Layout::nt;
  if (in == DType::f8e4m3) opt.a_scales = &o.sa.tensor(), opt.b_scales = &o.sb.tensor();
  const Tensor b0 = o.b_of(0), sb0 = in == DType::f8e4m3 ? o.sb_of(0) : Tensor();
  if (in == DType::f8e4m3) opt.b_scales = &sb0;
  p.results.push_back(timed(
      "sol", [] { return std::string("sol::gemm (sm90 persistent)"); }, [&] { gemm(o.a, b0, d_sol, opt); }, flush));
  AnchorCalls anchor;
  Result r = timed(
      "cublaslt",
      [&] {
        anchor.add(o, scaling, 0, 0, m, o.a.tensor(), d_anchor.tensor());
        return anchor.describe();
      },
      [&] { anchor.run(); }, flush);
  // A per-tensor anchor (asked for, or stood in where block scaling has no algorithm) multiplies
  // with scales of 1: a different product, not compared.
  if (r.error.empty() && p.results[0].error.empty() && scaling != CublasLtFp8Scaling::per_tensor &&
      anchor.fallback.empty())
    note_check(r, relative_difference(d_anchor, d_sol, {{0, m}}));
  p.results.push_back(std::move(r));
  pending.push_back(std::move(p));
}

// A layout-nn square: B [K, N] as stored, bf16 (fp8 wgmma reads K-major operands only, so Sol
// has no fp8 nn); the anchor is cuBLASLt in the same op form (NN in its column-major terms).
void bench_square_nn(const Shape& s, const DeviceBuffer& flush) {
  const int64_t m = s.group_m[0];
  Operands o(DType::bf16, s, 300);
  const Tensor b = o.b.tensor().reshape(std::vector<int64_t>{s.k, s.n});  // the same random bytes, [K, N]
  DeviceBuffer d_sol(kDev, DType::bf16, {m, s.n}), d_anchor(kDev, DType::bf16, {m, s.n});
  Pending p;
  p.w = {"gemm", s.name, dims_of(s), "bf16", 2.0 * double(m) * double(s.n) * double(s.k), cost_bytes(o, m, 1)};
  GemmOptions opt;
  opt.layout = Layout::nn;
  p.results.push_back(timed(
      "sol", [] { return std::string("sol::gemm nn (sm90 persistent, B MN-major)"); },
      [&] { gemm(o.a, b, d_sol, opt); }, flush));
  std::optional<CublasLtGemm> anchor;
  Result r = timed(
      "cublaslt",
      [&] {
        anchor.emplace(kDev, CublasLtProblem{DType::bf16, m, s.n, s.k, CublasLtFp8Scaling::none, Layout::nn});
        return anchor->describe();
      },
      [&] { anchor->run(o.a, b, d_anchor); }, flush);
  if (r.error.empty() && p.results[0].error.empty()) note_check(r, relative_difference(d_anchor, d_sol, {{0, m}}));
  p.results.push_back(std::move(r));
  pending.push_back(std::move(p));
}

void bench_grouped(const Shape& s, DType in, CublasLtFp8Scaling scaling, bool masked, const DeviceBuffer& flush) {
  const int64_t g = int64_t(s.group_m.size());
  Operands o(in, s, 200);
  int64_t useful = 0, used = 0, max_m = 0;
  for (int64_t m : s.group_m) useful += m, used += m > 0, max_m = std::max(max_m, m);
  Pending p;
  p.w = {masked ? "gemm-grouped-masked" : "gemm-grouped-contiguous", s.name, dims_of(s),
         in == DType::bf16 ? "bf16" : "fp8", 2.0 * double(useful) * double(s.n) * double(s.k), cost_bytes(o, useful, used)};
  GroupedGemmOptions opt;
  if (in == DType::f8e4m3) opt.a_scales = &o.sa.tensor(), opt.b_scales = &o.sb.tensor();
  // Contiguous: each expert's rows padded to 128 (padding rows -1, as moe_permute lays them out).
  // Masked: a [G, max_m, K] viewed over the same rows, expert e's at e * max_m.
  std::vector<int32_t> layout;
  std::vector<std::pair<int64_t, int64_t>> rows;  // [start, stop) of each expert's useful rows
  int64_t start = 0;
  for (int64_t e = 0; e < g; ++e) {
    const int64_t m = s.group_m[size_t(e)], padded = (m + kBlock - 1) / kBlock * kBlock;
    const int64_t at = masked ? e * max_m : start;
    rows.push_back({at, at + m});
    for (int64_t i = 0; i < padded; ++i) layout.push_back(i < m ? int32_t(e) : -1);
    start += padded;
  }
  const int64_t d_rows = o.rows;
  DeviceBuffer d_sol(kDev, DType::bf16, {d_rows, s.n}), d_anchor(kDev, DType::bf16, {d_rows, s.n});
  DeviceBuffer group_info;
  const Tensor a_masked = o.a.tensor().slice(0, 0, g * max_m).reshape(std::vector<int64_t>{g, max_m, s.k});
  const Tensor d_masked = d_sol.tensor().slice(0, 0, g * max_m).reshape(std::vector<int64_t>{g, max_m, s.n});
  // The operands hold rows for both layouts; the contiguous one reads its padded rows only.
  const int64_t contiguous_rows = int64_t(layout.size());
  const Tensor a_contiguous = o.a.tensor().slice(0, 0, contiguous_rows);
  const Tensor d_contiguous = d_sol.tensor().slice(0, 0, contiguous_rows);
  Tensor sa_masked, sa_contiguous;
  if (masked) {
    std::vector<int32_t> mm(s.group_m.begin(), s.group_m.end());
    group_info = DeviceBuffer(kDev, DType::i32, {g});
    transfer(Tensor(mm.data(), DType::i32, {g}), group_info);
    if (in == DType::f8e4m3) {
      sa_masked = o.sa.tensor().slice(0, 0, g * max_m).reshape(std::vector<int64_t>{g, max_m, o.kb});
      opt.a_scales = &sa_masked;
    }
  } else {
    group_info = DeviceBuffer(kDev, DType::i32, {int64_t(layout.size())});
    transfer(Tensor(layout.data(), DType::i32, {int64_t(layout.size())}), group_info);
    if (in == DType::f8e4m3) {
      sa_contiguous = o.sa.tensor().slice(0, 0, contiguous_rows);
      opt.a_scales = &sa_contiguous;
    }
  }
  p.results.push_back(timed(
      "sol", [&] { return std::string(masked ? "sol::grouped_gemm_masked" : "sol::grouped_gemm_contiguous"); },
      [&] {
        if (masked) grouped_gemm_masked(a_masked, o.b, group_info, d_masked, opt);
        else grouped_gemm_contiguous(a_contiguous, o.b, group_info, d_contiguous, opt);
      },
      flush));
  // The contiguous layout is read on the device only: its report says whether the kernel ran it.
  if (!masked && p.results[0].error.empty()) try {
      check_grouped_layouts(kDev);
    } catch (const Error& e) {
      p.results[0].error = e.what();
    }
  AnchorCalls anchor;
  Result r = timed(
      "cublaslt",
      [&] {
        for (int64_t e = 0; e < g; ++e) {
          const auto [lo, hi] = rows[size_t(e)];
          anchor.add(o, scaling, e, lo, hi - lo, o.a.tensor().slice(0, lo, hi), d_anchor.tensor().slice(0, lo, hi));
        }
        return anchor.describe();
      },
      [&] { anchor.run(); }, flush);
  // A per-tensor anchor (asked for, or stood in where block scaling has no algorithm) multiplies
  // with scales of 1: a different product, not compared.
  if (r.error.empty() && p.results[0].error.empty() && scaling != CublasLtFp8Scaling::per_tensor &&
      anchor.fallback.empty())
    note_check(r, relative_difference(d_anchor, d_sol, rows));
  p.results.push_back(std::move(r));
  pending.push_back(std::move(p));
}

}  // namespace

SOL_GPU_TEST(bench_gemm) {
  const CudaDeviceInfo& info = cuda_device(0);
  const CublasLtLibrary& lib = cublaslt_library();
  const CublasLtFp8Scaling fp8 =
      lib.loaded ? cublaslt_fp8_scaling(lib.version, info.cc_major, info.cc_minor) : CublasLtFp8Scaling::none;
  std::printf("device %s %s; cuBLASLt %s; its fp8 scaling here: %s\n", info.name.c_str(), info.arch().c_str(),
              lib.loaded ? (lib.version_text() + " (" + lib.file + ")").c_str() : lib.reason.c_str(),
              std::string(cublaslt_fp8_scaling_name(fp8)).c_str());
  // $SOL_BENCH_GEMM_SECONDS: no shape is started after that many seconds (device-check's budget).
  const char* budget_env = std::getenv("SOL_BENCH_GEMM_SECONDS");
  const double budget = budget_env && *budget_env ? std::atof(budget_env) : 0;
  const auto start = std::chrono::steady_clock::now();
  DeviceBuffer flush(kDev, size_t(256) << 20);
  Ceilings c;
  c.measure();
  std::printf("ceilings (before the table): mma_bf16 %.1f TFLOP/s, mma_fp8 %.1f TFLOP/s, hbm_read %.1f GB/s\n",
              c.mma_bf16 / 1e12, c.mma_fp8 / 1e12, c.hbm_read / 1e9);
  for (const Shape& s : table())
    for (DType in : {DType::bf16, DType::f8e4m3}) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (budget > 0 && elapsed > budget) {
        std::printf("BENCH {\"op\": \"gemm\", \"shape\": \"%s\", \"dtype\": \"%s\", \"skipped\": "
                    "\"SOL_BENCH_GEMM_SECONDS = %.0f spent\"}\n",
                    s.name.c_str(), in == DType::bf16 ? "bf16" : "fp8", budget);
        continue;
      }
      const CublasLtFp8Scaling scaling = in == DType::bf16 ? CublasLtFp8Scaling::none : fp8;
      if (s.layout == "nn" && in != DType::bf16) continue;
      const size_t done = pending.size();
      try {
        if (s.layout == "nn") bench_square_nn(s, flush);
        else if (s.group_m.size() == 1) bench_plain(s, in, scaling, flush);
        else
          for (bool masked : {false, true}) bench_grouped(s, in, scaling, masked, flush);
      } catch (const std::exception& e) {
        SOL_EXPECT(false, s.name, " ", dtype_name(in), ": ", e.what());
      }
      for (size_t i = done; i < pending.size(); ++i) print_record(pending[i], c, true);
    }
  c.measure();
  std::printf("ceilings (best of before and after): mma_bf16 %.1f TFLOP/s, mma_fp8 %.1f TFLOP/s, hbm_read %.1f GB/s\n",
              c.mma_bf16 / 1e12, c.mma_fp8 / 1e12, c.hbm_read / 1e9);
  for (const Pending& p : pending) print_record(p, c, false);
  std::printf("bench_gemm: done, %zu records\n", pending.size());
  SOL_EXPECT(failures == 0, failures, " anchor outputs differ from Sol's");
}

}  // namespace sol
