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
#include "ops/gemm/reference.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "sol/registry.h"

namespace sol {

namespace {

struct GemmShape {
  int64_t m, n, k;
  DType in, out;
  Layout layout;
  bool packed, bias, silu;
  float alpha, beta;
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
  check(s.m >= 0 && s.n >= 0 && s.k >= 0, "gemm", "m, n, k must be >= 0");
  s.in = p.dtype("dtype");
  s.out = p.dtype("out");
  check(s.in == DType::f32 || s.in == DType::bf16, "gemm", "--dtype = ", dtype_name(s.in),
        " but must be f32 or bf16");
  const std::string& layout = p.text("layout");
  check(layout == "nn" || layout == "nt", "gemm", "--layout = ", layout, " but must be nn or nt");
  s.layout = layout == "nn" ? Layout::nn : Layout::nt;
  const std::string& act = p.text("act");
  check(act == "none" || act == "silu", "gemm", "--act = ", act, " but must be none or silu");
  s.silu = act == "silu";
  s.packed = p.integer("packed") != 0;
  s.bias = p.integer("bias") != 0;
  s.alpha = parse_float(p, "alpha");
  s.beta = parse_float(p, "beta");
  return s;
}

class GemmCase : public OpCase {
 public:
  GemmCase(const GemmShape& s, int64_t cold_bytes) : s_(s) {
    const int64_t bk = s.layout == Layout::nn ? s.k : s.n, bn = s.layout == Layout::nn ? s.n : s.k;
    const int64_t set_bytes = int64_t(cost().bytes);
    for (int i = 0; i < sets_for(set_bytes, cold_bytes); ++i) {
      const uint64_t seed = 1000 * uint64_t(i);
      a_.emplace_back(s.in, std::initializer_list<int64_t>{s.m, s.k});
      b_.emplace_back(s.in, std::initializer_list<int64_t>{bk, bn});
      d_.emplace_back(s.out, std::initializer_list<int64_t>{s.m, s.n});
      fill_random(a_.back(), seed + 1, 1.0);
      fill_random(b_.back(), seed + 2, 1.0);
      poison(d_.back());
      if (s.beta != 0.0f) {
        c_.emplace_back(s.out, std::initializer_list<int64_t>{s.m, s.n});
        fill_random(c_.back(), seed + 3, 1.0);
      }
      if (s.packed) packed_.push_back(pack_b(b_.back(), s.layout));
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
    return os.str();
  }
  std::string dtype() const override {
    return std::string(dtype_name(s_.in)) + "->" + std::string(dtype_name(s_.out));
  }
  Cost cost() const override {
    const double in = double(dtype_size(s_.in)), out = double(dtype_size(s_.out));
    const double m = double(s_.m), n = double(s_.n), k = double(s_.k);
    Cost c;
    c.flops = 2 * m * n * k;
    c.bytes = (m * k + k * n) * in + m * n * out * (s_.beta != 0.0f ? 2 : 1) + (s_.bias ? 4 * n : 0);
    c.compute = s_.in == DType::bf16 ? Unit::dot_bf16 : Unit::fma_f32;
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
    Buffer ref(DType::f32, {rows, s_.n}), got(s_.out, {rows, s_.n});
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t r = rows == s_.m ? i : (rows == 1 ? 0 : i * (s_.m - 1) / (rows - 1));
      Tensor c_row = s_.beta != 0.0f ? c_[0].tensor().slice(0, r, r + 1) : Tensor();
      reference_gemm(a_[0].tensor().slice(0, r, r + 1), b_[0], s_.layout, s_.beta != 0.0f ? &c_row : nullptr,
                     s_.alpha, s_.beta, bias_ ? &bias_->tensor() : nullptr,
                     s_.silu ? Activation::silu : Activation::none, ref.tensor().slice(0, i, i + 1));
      std::memcpy(got.tensor().ptr({i, 0}), d_[0].tensor().ptr({r, 0}), size_t(s_.n) * dtype_size(s_.out));
    }
    // f32 sums in a fixed order drift like a random walk: about eps * sqrt(K) relative.
    const double tol = s_.out == DType::bf16 || s_.in == DType::bf16
                           ? 1e-2
                           : 1e-5 * std::max(1.0, std::sqrt(double(s_.k) / 4096.0));
    CheckResult r = compare_relative(got, ref, tol);
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
    return opt;
  }

  GemmShape s_;
  std::vector<Buffer> a_, b_, c_, d_;
  std::vector<PackedMatrix> packed_;
  std::optional<Buffer> bias_;
};

}  // namespace

void register_gemm_ops() {
  OpInfo op;
  op.name = "gemm";
  op.summary = "D = act(alpha * A * op(B) + beta * C + bias); f32 (FMA) or bf16 (vdpbf16ps) inputs";
  op.params = {
      {"m", "rows of A and D", "2048", ParamSpec::size},
      {"n", "columns of D", "2048", ParamSpec::size},
      {"k", "columns of A", "2048", ParamSpec::size},
      {"dtype", "A and B: f32 or bf16", "f32", ParamSpec::dtype},
      {"out", "D (and C): f32, or bf16 for bf16 inputs", "f32", ParamSpec::dtype},
      {"layout", "nn: B is [K, N]; nt: B is [N, K]", "nn", ParamSpec::text},
      {"packed", "1: B packed once with pack_b before timing", "0", ParamSpec::integer},
      {"alpha", "scale of A * B", "1", ParamSpec::text},
      {"beta", "scale of C (0: C is not read)", "0", ParamSpec::text},
      {"bias", "1: add a bias [N]", "0", ParamSpec::integer},
      {"act", "none or silu", "none", ParamSpec::text},
  };
  // DeepSeek-V3 GEMMs (decode M = 1, 16; prefill M = 128, 4096), then squares. Sized so that the
  // whole table runs in ~20 s per thread count.
  auto bf16_nt = [](const char* m, const char* n, const char* k) {
    return std::map<std::string, std::string>{{"m", m}, {"n", n}, {"k", k}, {"dtype", "bf16"},
                                              {"out", "bf16"}, {"layout", "nt"}, {"packed", "1"}};
  };
  op.bench_table = {bf16_nt("1", "24576", "1536"),   bf16_nt("16", "24576", "1536"),
                    bf16_nt("16", "7168", "2048"),   bf16_nt("128", "7168", "2048"),
                    bf16_nt("4096", "2112", "7168"),
                    {{"m", "1"}, {"n", "4096"}, {"k", "7168"}, {"layout", "nt"}, {"packed", "1"}},
                    {{"m", "1024"}, {"n", "1024"}, {"k", "1024"}},
                    {{"m", "2048"}, {"n", "2048"}, {"k", "2048"}},
                    {{"m", "2048"}, {"n", "2048"}, {"k", "2048"}, {"dtype", "bf16"}}};
  op.check_table = {
      {{"m", "1"}, {"n", "1"}, {"k", "1"}},
      {{"m", "17"}, {"n", "33"}, {"k", "37"}},
      {{"m", "127"}, {"n", "100"}, {"k", "129"}, {"layout", "nt"}, {"alpha", "0.5"}, {"beta", "-1.5"}},
      {{"m", "13"}, {"n", "65"}, {"k", "513"}, {"packed", "1"}},
      {{"m", "16"}, {"n", "4100"}, {"k", "300"}, {"layout", "nt"}, {"packed", "1"}},
      {{"m", "5"}, {"n", "7"}, {"k", "0"}, {"beta", "2"}, {"bias", "1"}},
      {{"m", "0"}, {"n", "7"}, {"k", "5"}},
      {{"m", "17"}, {"n", "50"}, {"k", "301"}, {"dtype", "bf16"}, {"out", "bf16"}, {"layout", "nt"}, {"packed", "1"}},
      {{"m", "127"}, {"n", "95"}, {"k", "1031"}, {"dtype", "bf16"}, {"bias", "1"}, {"act", "silu"}},
      {{"m", "33"}, {"n", "70"}, {"k", "1101"}, {"dtype", "bf16"}, {"out", "bf16"}, {"beta", "1"}},
      {{"m", "1"}, {"n", "2112"}, {"k", "7168"}, {"dtype", "bf16"}, {"out", "bf16"}, {"layout", "nt"}, {"packed", "1"}},
  };
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<GemmCase>(parse_shape(p), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
