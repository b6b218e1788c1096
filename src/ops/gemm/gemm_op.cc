// Registry entry for gemm: parameters, DeepSeek-V3 bench shapes, cost, and the check against
// the fp64 reference (relative error norm + DeepGEMM's diff metric).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/gemm_device_bench.h"
#include "ops/gemm/problem.h"
#include "ops/gemm/reference.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "sol/quant.h"
#include "sol/registry.h"

namespace sol {

namespace {

struct GemmShape {
  int64_t m, n, k;
  DType in, b_in, out;  // A, B (as stored) and D
  Layout layout;
  bool packed, bias, silu;
  float alpha, beta;
  ScaleFormat scales;  // how the fp8 scales are rounded (quant_fp8_*)
};

float parse_float(const OpParams& p, const std::string& name) {
  const std::string& s = p.text(name);
  try {
    size_t used = 0;
    float v = std::stof(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  fail("gemm", "--", name, " = '", s, "' is not a number");
}

GemmShape parse_shape(const OpParams& p) {
  GemmShape s;
  s.m = p.integer("m");
  s.n = p.integer("n");
  s.k = p.integer("k");
  sol::check(s.m >= 0 && s.n >= 0 && s.k >= 0, "gemm", "m, n, k must be >= 0");
  const std::string& dtype = p.text("dtype");
  if (dtype == "bf16xfp8" || dtype == "bf16xf8e4m3") {
    s.in = DType::bf16;
    s.b_in = DType::f8e4m3;
  } else {
    s.in = parse_dtype(dtype, "gemm --dtype");
    s.b_in = s.in == DType::u8 ? DType::i8 : s.in;
  }
  sol::check(s.in == DType::f32 || s.in == DType::bf16 || s.in == DType::i8 || s.in == DType::u8 ||
            s.in == DType::f8e4m3,
        "gemm", "--dtype = ", dtype, " but must be f32, bf16, s8, u8, fp8 or bf16xfp8");
  const std::string& out = p.text("out");
  s.out = out != "auto"                           ? parse_dtype(out, "gemm --out")
          : s.in == DType::f32                    ? DType::f32
          : s.in == DType::i8 || s.in == DType::u8 ? DType::i32
                                                  : DType::bf16;
  const std::string& layout = p.text("layout");
  sol::check(layout == "nn" || layout == "nt", "gemm", "--layout = ", layout, " but must be nn or nt");
  s.layout = layout == "nn" ? Layout::nn : Layout::nt;
  const std::string& act = p.text("act");
  sol::check(act == "none" || act == "silu", "gemm", "--act = ", act, " but must be none or silu");
  s.silu = act == "silu";
  s.packed = p.integer("packed") != 0;
  s.bias = p.integer("bias") != 0;
  s.alpha = parse_float(p, "alpha");
  s.beta = parse_float(p, "beta");
  s.scales = parse_gemm_scales("gemm", p.text("scales"), s.in == DType::f8e4m3 || s.b_in == DType::f8e4m3);
  return s;
}

class GemmCase : public OpCase {
 public:
  GemmCase(const GemmShape& s, int64_t cold_bytes) : s_(s) {
    const int64_t bk = s.layout == Layout::nn ? s.k : s.n, bn = s.layout == Layout::nn ? s.n : s.k;
    const int64_t set_bytes = int64_t(cost().bytes);
    const bool a_fp8 = s.in == DType::f8e4m3, b_fp8 = s.b_in == DType::f8e4m3;
    QuantOptions quant;
    quant.scale = s.scales;
    sol::check(!(a_fp8 || b_fp8) || s.k % kFp8ScaleBlock == 0, "gemm", "--k = ", s.k,
          " but fp8 block scales need k % 128 == 0");
    for (int i = 0; i < sets_for(set_bytes, cold_bytes); ++i) {
      const uint64_t seed = 1000 * uint64_t(i);
      a_.emplace_back(s.in, std::initializer_list<int64_t>{s.m, s.k});
      b_.emplace_back(s.b_in, std::initializer_list<int64_t>{bk, bn});
      d_.emplace_back(s.out, std::initializer_list<int64_t>{s.m, s.n});
      // Integers over their whole range; fp8 through Sol's own DeepSeek quantizer, so the
      // codes and the per-block scales are what a real model feeds in.
      const double range = is_float(s.in) ? 1.0 : 300.0;
      if (a_fp8) {
        Buffer f(DType::f32, {s.m, s.k});
        fill_random(f, seed + 1, 2.0);
        a_scales_.emplace_back(DType::f32, std::initializer_list<int64_t>{s.m, s.k / kFp8ScaleBlock});
        quant_fp8_per_token(f, a_.back(), a_scales_.back(), quant);
      } else {
        fill_random(a_.back(), seed + 1, range);
      }
      if (b_fp8) {
        sol::check(s.layout == Layout::nt, "gemm", "--layout = nn but the fp8 bench quantizes B as [N, K] (use nt)");
        Buffer f(DType::f32, {s.n, s.k});
        fill_random(f, seed + 2, 0.1);
        b_scales_.emplace_back(DType::f32, std::initializer_list<int64_t>{(s.n + 127) / 128, s.k / kFp8ScaleBlock});
        quant_fp8_per_block(f, b_.back(), b_scales_.back(), quant);
      } else {
        fill_random(b_.back(), seed + 2, range);
      }
      poison(d_.back());
      if (s.beta != 0.0f) {
        c_.emplace_back(s.out, std::initializer_list<int64_t>{s.m, s.n});
        fill_random(c_.back(), seed + 3, 1.0);
      }
      if (s.packed) packed_.push_back(pack_b(b_.back(), s.layout, b_fp8 ? &b_scales_.back().tensor() : nullptr));
    }
    if (s.bias) {
      bias_.emplace(DType::f32, std::initializer_list<int64_t>{s.n});
      fill_random(*bias_, 4, 1.0);
    }
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "m=" << s_.m << ",n=" << s_.n << ",k=" << s_.k << "," << (s_.layout == Layout::nn ? "nn" : "nt");
    if (s_.packed) os << ",packed";
    if (s_.alpha != 1.0f || s_.beta != 0.0f) os << ",alpha=" << s_.alpha << ",beta=" << s_.beta;
    if (s_.bias) os << ",bias";
    if (s_.silu) os << ",silu";
    if (s_.scales == ScaleFormat::ue8m0) os << ",ue8m0";
    return os.str();
  }
  std::string dtype() const override {
    std::string in(dtype_name(s_.in));
    if (s_.b_in != s_.in) in += "x" + std::string(dtype_name(s_.b_in));
    return in + "->" + std::string(dtype_name(s_.out));
  }
  Cost cost() const override {
    const double in = double(dtype_size(s_.in)), b_in = double(dtype_size(s_.b_in)),
                 out = double(dtype_size(s_.out));
    const double m = double(s_.m), n = double(s_.n), k = double(s_.k);
    Cost c;
    c.flops = 2 * m * n * k;
    c.bytes = m * k * in + k * n * b_in + m * n * out * (s_.beta != 0.0f ? 2 : 1) + (s_.bias ? 4 * n : 0);
    if (s_.in == DType::f8e4m3) c.bytes += m * k / 128 * 4;
    if (s_.b_in == DType::f8e4m3) c.bytes += std::ceil(n / 128) * k / 128 * 4;
    // The floor is the best unit the machine has for the dtype, whichever kernel runs: the AMX
    // tiles wherever the level has them (the op takes them at any M), else the vector dot
    // products; fp8 on the bf16 units (no CPU here multiplies fp8).
    const bool amx = gemm_detail::amx_runs(gemm_detail::gemm_kernels(), std::max<int64_t>(s_.m, 1),
                                           s_.b_in == DType::i8 ? DType::i8 : s_.in);
    c.compute = s_.in == DType::f32 ? Unit::fma_f32
                : s_.b_in == DType::i8 ? (amx ? Unit::amx_int8 : Unit::dot_s8)
                                        : (amx ? Unit::amx_bf16 : Unit::dot_bf16);
    c.memory = Unit::mem_read;
    return c;
  }
  int input_sets() const override { return int(a_.size()); }
  void run(int set) override {
    const size_t i = size_t(set);
    GemmOptions opt = options(i);
    if (s_.packed) gemm(a_[i], packed_[i], d_[i], opt);
    else gemm(a_[i], b_[i], d_[i], opt);
  }
  CheckResult check() override {
    poison(d_[0]);
    run(0);
    // Large shapes (the bench table's, checked by `sol report`) compare a fixed sample of rows
    // spread over M, first and last included: an fp64 reference of every row of a 4096 x 2112 x
    // 7168 product would take minutes. Small shapes compare every row.
    const int64_t rows = s_.m * s_.n * s_.k > (int64_t(1) << 28) ? std::min<int64_t>(s_.m, 8) : s_.m;
    Buffer ref(s_.out == DType::i32 ? DType::i32 : DType::f32, {rows, s_.n}), got(s_.out, {rows, s_.n});
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t r = rows == s_.m ? i : (rows == 1 ? 0 : i * (s_.m - 1) / (rows - 1));
      Tensor c_row = s_.beta != 0.0f ? c_[0].tensor().slice(0, r, r + 1) : Tensor();
      Tensor sa_row = a_scales_.empty() ? Tensor() : a_scales_[0].tensor().slice(0, r, r + 1);
      reference_gemm(a_[0].tensor().slice(0, r, r + 1), b_[0], s_.layout, s_.beta != 0.0f ? &c_row : nullptr,
                     s_.alpha, s_.beta, bias_ ? &bias_->tensor() : nullptr,
                     s_.silu ? Activation::silu : Activation::none, ref.tensor().slice(0, i, i + 1),
                     a_scales_.empty() ? nullptr : &sa_row, b_scales_.empty() ? nullptr : &b_scales_[0].tensor());
      std::memcpy(got.tensor().ptr({i, 0}), d_[0].tensor().ptr({r, 0}), size_t(s_.n) * dtype_size(s_.out));
    }
    // f32 sums in a fixed order drift like a random walk: about eps * sqrt(K) relative.
    const double tol = s_.out == DType::bf16 || s_.in == DType::bf16
                           ? 1e-2
                           : 1e-5 * std::max(1.0, std::sqrt(double(s_.k) / 4096.0));
    // Integer GEMM is exact: every bit must match.
    CheckResult r = s_.out == DType::i32 ? compare_bitwise(got, ref) : compare_relative(got, ref, tol);
    std::ostringstream os;
    if (rows < s_.m) os << rows << " sampled rows; ";
    os << "diff (1 - 2sum(xy)/sum(x^2+y^2)) = " << gemm_diff_metric(got, ref);
    r.detail = r.detail.empty() ? os.str() : r.detail + "; " + os.str();
    return r;
  }

 private:
  GemmOptions options(size_t set) const {
    GemmOptions opt;
    opt.alpha = s_.alpha;
    opt.beta = s_.beta;
    opt.layout = s_.layout;
    opt.c = s_.beta != 0.0f ? &c_[set].tensor() : nullptr;
    opt.bias = bias_ ? &bias_->tensor() : nullptr;
    opt.activation = s_.silu ? Activation::silu : Activation::none;
    opt.a_scales = a_scales_.empty() ? nullptr : &a_scales_[set].tensor();
    opt.b_scales = b_scales_.empty() || s_.packed ? nullptr : &b_scales_[set].tensor();
    return opt;
  }

  GemmShape s_;
  std::vector<Buffer> a_, b_, c_, d_, a_scales_, b_scales_;
  std::vector<PackedMatrix> packed_;
  std::optional<Buffer> bias_;
};

}  // namespace

void register_grouped_gemm_op();  // grouped_gemm_op.cc
std::unique_ptr<OpCase> make_gemm_device_case(const OpParams& p, int64_t cold_bytes);  // gemm_device_op.cc

void register_gemm_ops() {
  OpInfo op;
  op.name = "gemm";
  op.summary = "D = act(alpha * A * op(B) + beta * C + bias); f32 (FMA), bf16 (vdpbf16ps, or FMA where faster), s8/u8 (vpdpbusd), "
               "fp8 with block scales (widened to bf16)";
  op.params = {
      {"m", "rows of A and D", "2048", ParamSpec::size},
      {"n", "columns of D", "2048", ParamSpec::size},
      {"k", "columns of A", "2048", ParamSpec::size},
      {"dtype", "A and B: f32, bf16, s8 (s8 x s8), u8 (u8 x s8), fp8 (e4m3, DeepGEMM block scales) or bf16xfp8",
       "f32", ParamSpec::text},
      {"out", "D (and C): auto (f32 for f32, i32 for int8, else bf16), f32, bf16 or i32", "auto", ParamSpec::text},
      {"layout", "nn: B is [K, N]; nt: B is [N, K]", "nn", ParamSpec::text},
      {"packed", "1: B packed once with pack_b before timing", "0", ParamSpec::integer},
      {"alpha", "scale of A * B", "1", ParamSpec::text},
      {"beta", "scale of C (0: C is not read)", "0", ParamSpec::text},
      {"bias", "1: add a bias [N]", "0", ParamSpec::integer},
      {"act", "none or silu", "none", ParamSpec::text},
      device_param(),
      {"scales", "fp8 scale rounding: f32, or ue8m0 (powers of two, as UE8M0 stores them)", "f32", ParamSpec::text},
      {"anchor", "on a device: none, or cublaslt (cuBLASLt on the same operands, on Sol's row, same floor)", "none",
       ParamSpec::text},
  };
  // The bench table: every DeepSeek-V3 GEMM of issue 3 (decode M = 1, 16; prefill M = 128,
  // 4096; weights [N, K] packed once, as a model loads them) in bf16, the same shapes at M = 128
  // in fp8 and s8, then squares 256..4096 in f32 and bf16. bench/gemm_shapes.json lists the
  // same shapes for the anchor benchmark. The report runs a subset sized to ~25 s per thread
  // count.
  using Case = std::map<std::string, std::string>;
  auto nt = [](const std::string& m, const std::string& n, const std::string& k, const std::string& dtype) {
    return Case{{"m", m}, {"n", n}, {"k", k}, {"dtype", dtype}, {"layout", "nt"}, {"packed", "1"}};
  };
  const std::pair<const char*, const char*> deepseek[] = {{"2112", "7168"},  {"24576", "1536"}, {"32768", "512"},
                                                          {"7168", "16384"}, {"4096", "7168"},  {"7168", "2048"}};
  for (const char* m : {"1", "16", "128", "4096"})
    for (auto [n, k] : deepseek) op.bench_table.push_back(nt(m, n, k, "bf16"));
  for (const char* dtype : {"fp8", "bf16xfp8", "s8"})
    for (auto [n, k] : deepseek) op.bench_table.push_back(nt("128", n, k, dtype));
  for (const char* size : {"256", "512", "1024", "2048", "4096"})
    for (const char* dtype : {"f32", "bf16"})
      op.bench_table.push_back({{"m", size}, {"n", size}, {"k", size}, {"dtype", dtype}});
  op.report_table = {nt("1", "24576", "1536", "bf16"),
                     nt("16", "24576", "1536", "bf16"),
                     nt("16", "7168", "2048", "bf16"),
                     nt("128", "7168", "2048", "bf16"),
                     nt("4096", "2112", "7168", "bf16"),
                     nt("1", "4096", "7168", "f32"),
                     nt("128", "7168", "2048", "fp8"),
                     nt("16", "7168", "2048", "fp8"),
                     nt("128", "7168", "2048", "s8"),
                     {{"m", "1024"}, {"n", "1024"}, {"k", "1024"}},
                     {{"m", "2048"}, {"n", "2048"}, {"k", "2048"}},
                     {{"m", "2048"}, {"n", "2048"}, {"k", "2048"}, {"dtype", "bf16"}, {"out", "f32"}}};
  op.check_table = {
      {{"m", "1"}, {"n", "1"}, {"k", "1"}},
      {{"m", "17"}, {"n", "33"}, {"k", "37"}},
      {{"m", "127"}, {"n", "100"}, {"k", "129"}, {"layout", "nt"}, {"alpha", "0.5"}, {"beta", "-1.5"}},
      {{"m", "13"}, {"n", "65"}, {"k", "513"}, {"packed", "1"}},
      {{"m", "16"}, {"n", "4100"}, {"k", "300"}, {"layout", "nt"}, {"packed", "1"}},
      {{"m", "5"}, {"n", "7"}, {"k", "0"}, {"beta", "2"}, {"bias", "1"}},
      {{"m", "0"}, {"n", "7"}, {"k", "5"}},
      {{"m", "17"}, {"n", "50"}, {"k", "301"}, {"dtype", "bf16"}, {"out", "bf16"}, {"layout", "nt"}, {"packed", "1"}},
      {{"m", "127"}, {"n", "95"}, {"k", "1031"}, {"dtype", "bf16"}, {"out", "f32"}, {"bias", "1"}, {"act", "silu"}},
      {{"m", "17"}, {"n", "33"}, {"k", "37"}, {"dtype", "s8"}},
      {{"m", "30"}, {"n", "70"}, {"k", "1300"}, {"dtype", "u8"}, {"layout", "nt"}, {"packed", "1"}, {"beta", "1"}},
      {{"m", "13"}, {"n", "130"}, {"k", "384"}, {"dtype", "fp8"}, {"layout", "nt"}},
      {{"m", "17"}, {"n", "200"}, {"k", "1152"}, {"dtype", "fp8"}, {"layout", "nt"}, {"packed", "1"}, {"out", "f32"}},
      {{"m", "5"}, {"n", "129"}, {"k", "256"}, {"dtype", "bf16xfp8"}, {"layout", "nt"}, {"packed", "1"}},
      {{"m", "33"}, {"n", "70"}, {"k", "1101"}, {"dtype", "bf16"}, {"out", "bf16"}, {"beta", "1"}},
      {{"m", "33"}, {"n", "70"}, {"k", "101"}, {"dtype", "bf16"}, {"out", "f32"}, {"alpha", "2"}},
      {{"m", "1"}, {"n", "2112"}, {"k", "7168"}, {"dtype", "bf16"}, {"out", "bf16"}, {"layout", "nt"}, {"packed", "1"}},
  };
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    if (!parse_device(p.text("device"), "gemm --device").is_cpu()) return make_gemm_device_case(p, cold_bytes);
    sol::check(p.text("anchor") == "none", "gemm", "--anchor = ", p.text("anchor"),
               " but anchors are timed on a device (--device cuda)");
    return std::make_unique<GemmCase>(parse_shape(p), cold_bytes);
  };
  register_op(std::move(op));
  register_grouped_gemm_op();
}

}  // namespace sol
