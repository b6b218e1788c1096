// Registry entry for the MoE grouped GEMM: experts of uneven row counts, DeepGEMM's contiguous
// layout (each expert padded to 128 rows with -1 rows, as moe_permute produces) or its masked
// layout, bf16 or fp8 operands; checked row by row against the fp64 reference.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/gemm_device_bench.h"
#include "ops/gemm/problem.h"
#include "ops/gemm/reference.h"
#include "ops/common/rows.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "sol/quant.h"
#include "sol/registry.h"

namespace sol {

// --rows: one row count per expert, comma-separated (the device case reads it too).
std::vector<int64_t> parse_grouped_rows(const std::string& text) {
  std::vector<int64_t> rows;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      sol::check(used == item.size() && v >= 0, "gemm-grouped", "--rows entry '", item, "' is not a row count >= 0");
      rows.push_back(v);
    } catch (const std::logic_error&) {
      fail("gemm-grouped", "--rows entry '", item, "' is not a number");
    }
  }
  sol::check(!rows.empty(), "gemm-grouped", "--rows is empty (one row count per expert, comma-separated)");
  return rows;
}

namespace {

class GroupedCase : public OpCase {
 public:
  explicit GroupedCase(const OpParams& p) : rows_(parse_grouped_rows(p.text("rows"))) {
    n_ = p.integer("n");
    k_ = p.integer("k");
    masked_ = p.text("layout") == "masked";
    sol::check(masked_ || p.text("layout") == "contiguous", "gemm-grouped", "--layout = ", p.text("layout"),
          " but must be contiguous or masked");
    const std::string& dtype = p.text("dtype");
    sol::check(dtype == "bf16" || dtype == "fp8" || dtype == "bf16xfp8", "gemm-grouped", "--dtype = ", dtype,
          " but must be bf16, fp8 or bf16xfp8");
    a_type_ = dtype == "fp8" ? DType::f8e4m3 : DType::bf16;
    b_type_ = dtype == "bf16" ? DType::bf16 : DType::f8e4m3;
    sol::check(b_type_ == DType::bf16 || k_ % 128 == 0, "gemm-grouped", "--k = ", k_, " but fp8 needs k % 128 == 0");
    QuantOptions quant;
    quant.scale = parse_gemm_scales("gemm-grouped", p.text("scales"), b_type_ == DType::f8e4m3);
    sol::check(p.text("anchor") == "none", "gemm-grouped", "--anchor = ", p.text("anchor"),
               " but anchors are timed on a device (--device cuda)");
    const int64_t g = int64_t(rows_.size());
    max_m_ = std::max<int64_t>(1, *std::max_element(rows_.begin(), rows_.end()));
    // The rows of A: contiguous stacks each expert's block padded to the alignment; masked
    // gives every expert max_m rows of which rows_[e] are valid.
    for (int64_t e = 0; e < g; ++e) {
      const int64_t r = rows_[size_t(e)];
      const int64_t padded = (r + kGroupedGemmMAlignment - 1) / kGroupedGemmMAlignment * kGroupedGemmMAlignment;
      for (int64_t i = 0; i < padded; ++i) ids_.push_back(i < r ? int32_t(e) : -1);
    }
    m_ = masked_ ? g * max_m_ : int64_t(ids_.size());

    b_ = Buffer(b_type_, {g, n_, k_});
    if (b_type_ == DType::f8e4m3) {
      b_scales_ = Buffer(DType::f32, {g, (n_ + 127) / 128, k_ / 128});
      for (int64_t e = 0; e < g; ++e) {
        Buffer w(DType::f32, {n_, k_});
        fill_random(w, 100 + uint64_t(e), 0.1);
        quant_fp8_per_block(w, plane(b_, e), plane(b_scales_, e), quant);
      }
    } else {
      fill_random(b_, 100, 0.5);
    }
    a_ = Buffer(a_type_, {m_, k_});
    if (a_type_ == DType::f8e4m3) {
      Buffer f(DType::f32, {m_, k_});
      fill_random(f, 200, 2.0);
      a_scales_ = Buffer(DType::f32, {m_, k_ / 128});
      quant_fp8_per_token(f, a_, a_scales_, quant);
    } else {
      fill_random(a_, 200, 2.0);
    }
    d_ = Buffer(DType::bf16, {m_, n_});
    poison(d_);
    layout_ = Buffer(DType::i32, {masked_ ? g : m_});
    if (masked_)
      for (int64_t e = 0; e < g; ++e) layout_.tensor().data_as<int32_t>()[e] = int32_t(rows_[size_t(e)]);
    else
      std::memcpy(layout_.data(), ids_.data(), ids_.size() * 4);
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "experts=" << rows_.size() << ",n=" << n_ << ",k=" << k_ << ",rows=";
    for (size_t e = 0; e < rows_.size(); ++e) os << (e ? ":" : "") << rows_[e];
    os << "," << (masked_ ? "masked" : "contiguous");
    return os.str();
  }
  std::string dtype() const override {
    return std::string(dtype_name(a_type_)) + "x" + std::string(dtype_name(b_type_)) + "->bf16";
  }
  Cost cost() const override {
    double rows = 0, experts = 0;
    for (int64_t r : rows_) {
      rows += double(r);
      experts += r > 0 ? 1 : 0;
    }
    const double n = double(n_), k = double(k_);
    Cost c;
    c.flops = 2 * rows * n * k;
    // Each used expert's weights once, the valid rows of A and D, the scales.
    c.bytes = experts * n * k * double(dtype_size(b_type_)) + rows * k * double(dtype_size(a_type_)) + rows * n * 2;
    if (b_type_ == DType::f8e4m3) c.bytes += experts * std::ceil(n / 128) * (k / 128) * 4;
    if (a_type_ == DType::f8e4m3) c.bytes += rows * (k / 128) * 4;
    // The best unit the machine has for bf16 (and fp8, widened), whichever kernel each
    // expert's GEMM takes: the AMX tiles wherever the level has them, else the vector unit
    // (dot_bf16, or fma_f32 where faster: compute_unit_on).
    c.compute = gemm_detail::amx_runs(gemm_detail::gemm_kernels(), 1, DType::bf16) ? Unit::amx_bf16 : Unit::dot_bf16;
    c.memory = Unit::mem_read;
    return c;
  }
  void run(int) override {
    GroupedGemmOptions opt;
    opt.a_scales = a_scales_.bytes() ? &a_scales_.tensor() : nullptr;
    opt.b_scales = b_scales_.bytes() ? &b_scales_.tensor() : nullptr;
    const int64_t g = int64_t(rows_.size());
    if (!masked_) return grouped_gemm_contiguous(a_, b_, layout_, d_, opt);
    Tensor sa = a_scales_.bytes() ? a_scales_.tensor().reshape({g, max_m_, k_ / 128}) : Tensor();
    if (a_scales_.bytes()) opt.a_scales = &sa;
    grouped_gemm_masked(a_.tensor().reshape({g, max_m_, k_}), b_, layout_, d_.tensor().reshape({g, max_m_, n_}),
                        opt);
  }
  CheckResult check() override {
    poison(d_);
    run(0);
    // Up to 16 rows spread over M (every row for small cases); rows that belong to no expert
    // must still hold the poison.
    const int64_t samples = std::min<int64_t>(m_, m_ * n_ * k_ > (int64_t(1) << 28) ? 16 : m_);
    CheckResult worst;
    worst.pass = true;
    worst.tolerance = 1e-2;
    for (int64_t s = 0; s < samples; ++s) {
      const int64_t r = samples == m_ ? s : s * (m_ - 1) / std::max<int64_t>(1, samples - 1);
      const int64_t e = expert_of(r);
      const Tensor got = d_.tensor().slice(0, r, r + 1);
      if (e < 0) {
        const auto* p = static_cast<const uint8_t*>(got.data());
        for (int64_t i = 0; i < n_ * 2; ++i)
          if (p[i] != 0xFF) return {false, 0.0, 1e-2, "row " + std::to_string(r) + " belongs to no expert but was written"};
        continue;
      }
      Buffer ref(DType::f32, {1, n_});
      Tensor sa = a_scales_.bytes() ? a_scales_.tensor().slice(0, r, r + 1) : Tensor();
      Tensor sb = b_scales_.bytes() ? plane(b_scales_, e) : Tensor();
      reference_gemm(a_.tensor().slice(0, r, r + 1), plane(b_, e), Layout::nt, nullptr, 1.0f, 0.0f, nullptr,
                     Activation::none, ref, a_scales_.bytes() ? &sa : nullptr, b_scales_.bytes() ? &sb : nullptr);
      Buffer row(DType::bf16, {1, n_});
      std::memcpy(row.data(), got.data(), size_t(n_) * 2);
      CheckResult c = compare_relative(row, ref, 1e-2);
      if (!c.pass) return {false, c.error, 1e-2, "row " + std::to_string(r) + " (expert " + std::to_string(e) + "): " + c.detail};
      worst.error = std::max(worst.error, c.error);
    }
    worst.detail = std::to_string(samples) + " sampled rows";
    return worst;
  }

 private:
  int64_t expert_of(int64_t r) const {
    if (!masked_) return ids_[size_t(r)];
    const int64_t e = r / max_m_;
    return r % max_m_ < rows_[size_t(e)] ? e : -1;
  }

  std::vector<int64_t> rows_;
  std::vector<int32_t> ids_;
  int64_t n_ = 0, k_ = 0, m_ = 0, max_m_ = 0;
  bool masked_ = false;
  DType a_type_ = DType::bf16, b_type_ = DType::bf16;
  Buffer a_, a_scales_, b_, b_scales_, d_, layout_;
};

}  // namespace

std::unique_ptr<OpCase> make_grouped_gemm_device_case(const OpParams& p, int64_t cold_bytes);  // grouped_gemm_device_op.cc

void register_grouped_gemm_op() {
  OpInfo op;
  op.name = "gemm-grouped";
  op.summary = "MoE grouped GEMM (DeepGEMM): contiguous layout with -1 padding rows, or masked layout; bf16 / fp8";
  op.params = {
      {"rows", "rows per expert, comma-separated (experts = their count)", "700,300,0,520,180,900,260,1236",
       ParamSpec::text},
      {"n", "columns of D (expert weights are [G, N, K])", "4096", ParamSpec::size},
      {"k", "columns of A", "7168", ParamSpec::size},
      {"dtype", "bf16, fp8 (e4m3 x e4m3, block scales) or bf16xfp8", "bf16", ParamSpec::text},
      {"layout", "contiguous (expert id per row, padded to 128) or masked (valid rows per expert)", "contiguous",
       ParamSpec::text},
      {"scales", "fp8 scale rounding: f32, or ue8m0 (powers of two, as UE8M0 stores them)", "f32", ParamSpec::text},
      device_param(),
      {"anchor", "on a device: none, or cublaslt (one cuBLASLt call per expert, on Sol's row, same floor)", "none",
       ParamSpec::text},
  };
  // Issue 3's grouped shapes: 8 experts of N=4096, K=7168 (gate/up) and N=7168, K=2048 (down),
  // 4096 rows dealt unevenly with one expert empty; then a decode-sized masked batch.
  const std::string uneven = "700,300,0,520,180,900,260,1236";
  using Case = std::map<std::string, std::string>;
  for (const char* dtype : {"bf16", "fp8"}) {
    op.bench_table.push_back(Case{{"rows", uneven}, {"n", "4096"}, {"k", "7168"}, {"dtype", dtype}});
    op.bench_table.push_back(Case{{"rows", uneven}, {"n", "7168"}, {"k", "2048"}, {"dtype", dtype}});
  }
  op.bench_table.push_back(
      Case{{"rows", "16,3,0,9,16,1,7,12"}, {"n", "7168"}, {"k", "2048"}, {"dtype", "fp8"}, {"layout", "masked"}});
  op.report_table = {
      Case{{"rows", "96,32,0,64,17,128,40,135"}, {"n", "7168"}, {"k", "2048"}, {"dtype", "fp8"}},
      Case{{"rows", "16,3,0,9,16,1,7,12"}, {"n", "7168"}, {"k", "2048"}, {"dtype", "fp8"}, {"layout", "masked"}}};
  op.check_table = {
      Case{{"rows", "5,0,17,1"}, {"n", "40"}, {"k", "256"}, {"dtype", "fp8"}},
      Case{{"rows", "5,0,17,1"}, {"n", "33"}, {"k", "70"}, {"dtype", "bf16"}},
      Case{{"rows", "3,9,0"}, {"n", "130"}, {"k", "128"}, {"dtype", "bf16xfp8"}, {"layout", "masked"}},
      Case{{"rows", "0,0"}, {"n", "16"}, {"k", "128"}, {"dtype", "fp8"}, {"layout", "masked"}},
  };
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    if (!parse_device(p.text("device"), "gemm-grouped --device").is_cpu())
      return make_grouped_gemm_device_case(p, cold_bytes);
    return std::make_unique<GroupedCase>(p);
  };
  register_op(std::move(op));
}

}  // namespace sol
