// `sol bench gemm-grouped --device cuda[:N]`: the MoE grouped GEMM's case when its operands live
// on a GPU (grouped_gemm_op.cc hands it over). The same problem as the CPU case (experts of
// uneven rows, DeepGEMM's contiguous layout padded to 128 rows with -1, or its masked layout; bf16
// or fp8 e4m3 with 1 x 128 / 128 x 128 scales from Sol's quantizer, f32 or UE8M0), the same cost,
// held to the dtype's wgmma peak (mma_bf16 or mma_fp8) or HBM read. `--anchor cublaslt` times
// one cuBLASLt call per non-empty expert on the same rows and weights, on Sol's row.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ops/common/buffer_sets.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/common/rows.h"
#include "ops/gemm/gemm_device_bench.h"
#include "ops/gemm/reference.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "sol/quant.h"
#include "sol/registry.h"

namespace sol {

std::vector<int64_t> parse_grouped_rows(const std::string& text);  // grouped_gemm_op.cc

namespace {

constexpr const char* kOp = "gemm-grouped";

// An expert's [rows, cols] matrix of a [G, rows, cols] tensor, device or host (plane() is host only).
Tensor expert_of(const Tensor& t, int64_t e) {
  return t.slice(0, e, e + 1).reshape(std::vector<int64_t>{t.shape(1), t.shape(2)});
}

// Arguments first, then the device and what it can run (as gemm_device_op.cc).
Device validated_device(const OpParams& p) {
  const std::string& dtype = p.text("dtype");
  const bool fp8 = dtype == "fp8";
  sol::check(dtype == "bf16" || fp8, kOp, "--dtype = ", dtype, " but on ", p.text("device"),
             " the grouped GEMM takes bf16 or fp8 (bf16 x fp8 is not on the device)");
  sol::check(p.text("layout") == "contiguous" || p.text("layout") == "masked", kOp, "--layout = ", p.text("layout"),
             " but must be contiguous or masked");
  sol::check(p.integer("n") >= 1 && p.integer("k") >= 1, kOp, "n, k must be >= 1");
  sol::check(!fp8 || p.integer("k") % kFp8ScaleBlock == 0, kOp, "--k = ", p.integer("k"),
             " but fp8 needs k % 128 == 0");
  parse_grouped_rows(p.text("rows"));
  parse_gemm_scales(kOp, p.text("scales"), fp8);
  parse_device_gemm_anchor(kOp, p.text("anchor"));
  const Device d = p.device("device");
  const CudaDeviceInfo& info = cuda_device(d.index);
  check_device_gemm_arch(kOp, d, info.cc_major, info.cc_minor, fp8);
  return d;
}

class GroupedDeviceCase : public OpCase {
 public:
  GroupedDeviceCase(const OpParams& p, int64_t cold_bytes)
      : device_(validated_device(p)), rows_(parse_grouped_rows(p.text("rows"))) {
    n_ = p.integer("n");
    k_ = p.integer("k");
    masked_ = p.text("layout") == "masked";
    in_ = p.text("dtype") == "fp8" ? DType::f8e4m3 : DType::bf16;
    scales_ = p.text("scales");
    const bool fp8 = in_ == DType::f8e4m3;
    QuantOptions quant;
    quant.scale = parse_gemm_scales(kOp, scales_, fp8);
    const int64_t g = int64_t(rows_.size()), kb = k_ / kFp8ScaleBlock, nb = (n_ + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
    max_m_ = std::max<int64_t>(1, *std::max_element(rows_.begin(), rows_.end()));
    // Expert e's rows: contiguous stacks each expert's block padded to the alignment (-1 rows);
    // masked gives every expert max_m rows of which rows_[e] are valid.
    int64_t at = 0;
    for (int64_t e = 0; e < g; ++e) {
      const int64_t r = rows_[size_t(e)];
      const int64_t padded = (r + kGroupedGemmMAlignment - 1) / kGroupedGemmMAlignment * kGroupedGemmMAlignment;
      starts_.push_back(masked_ ? e * max_m_ : at);
      for (int64_t i = 0; i < padded; ++i) ids_.push_back(i < r ? int32_t(e) : -1);
      at += padded;
    }
    m_ = masked_ ? g * max_m_ : int64_t(ids_.size());
    const std::optional<CublasLtFp8Scaling> scaling = requested_anchor_scaling(kOp, p.text("anchor"), device_, fp8);
    layout_.emplace(device_, DType::i32, std::initializer_list<int64_t>{masked_ ? g : m_});
    int32_t* info = layout_->host().tensor().data_as<int32_t>();
    for (int64_t i = 0; i < (masked_ ? g : m_); ++i) info[i] = masked_ ? int32_t(rows_[size_t(i)]) : ids_[size_t(i)];
    layout_->upload();

    for (int s = 0; s < sets_for(int64_t(cost().bytes), cold_bytes); ++s) {
      const uint64_t seed = 1000 * uint64_t(s);
      a_.emplace_back(device_, in_, std::initializer_list<int64_t>{m_, k_});
      b_.emplace_back(device_, in_, std::initializer_list<int64_t>{g, n_, k_});
      d_.emplace_back(device_, DType::bf16, std::initializer_list<int64_t>{m_, n_});
      if (fp8) {
        a_scales_.emplace_back(device_, DType::f32, std::initializer_list<int64_t>{m_, kb});
        b_scales_.emplace_back(device_, DType::f32, std::initializer_list<int64_t>{g, nb, kb});
        for (int64_t e = 0; e < g; ++e) {
          Buffer w(DType::f32, {n_, k_});
          fill_random(w, seed + 100 + uint64_t(e), 0.1);
          quant_fp8_per_block(w, plane(b_.back().host().tensor(), e), plane(b_scales_.back().host().tensor(), e), quant);
        }
        Buffer f(DType::f32, {m_, k_});
        fill_random(f, seed + 200, 2.0);
        quant_fp8_per_token(f, a_.back().host(), a_scales_.back().host(), quant);
        a_scales_.back().upload();
        b_scales_.back().upload();
      } else {
        fill_random(b_.back().host(), seed + 100, 0.5);
        fill_random(a_.back().host(), seed + 200, 2.0);
      }
      a_.back().upload();
      b_.back().upload();
      if (scaling) {
        if (!anchor_) anchor_.emplace(device_, in_, *scaling);
        for (int64_t e = 0; e < g; ++e) {
          const int64_t lo = starts_[size_t(e)], hi = lo + rows_[size_t(e)];
          const Tensor sa = fp8 ? a_scales_.back().host().tensor().slice(0, lo, hi) : Tensor();
          const Tensor sb = fp8 ? plane(b_scales_.back().host().tensor(), e) : Tensor();
          anchor_->add(s, a_.back().tensor().slice(0, lo, hi), expert_of(b_.back().tensor(), e),
                       d_.back().tensor().slice(0, lo, hi), fp8 ? &sa : nullptr, fp8 ? &sb : nullptr);
        }
      }
    }
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "experts=" << rows_.size() << ",n=" << n_ << ",k=" << k_ << ",rows=";
    for (size_t e = 0; e < rows_.size(); ++e) os << (e ? ":" : "") << rows_[e];
    os << "," << (masked_ ? "masked" : "contiguous");
    if (in_ == DType::f8e4m3 && scales_ != "f32") os << "," << scales_;
    return os.str();
  }
  std::string dtype() const override { return in_ == DType::bf16 ? "bf16xbf16->bf16" : "f8e4m3xf8e4m3->bf16"; }
  Device device() const override { return device_; }
  // The CPU case's cost (grouped_gemm_op.cc): used experts' weights once, the valid rows of A and
  // D, the scales; held to the dtype's wgmma peak on the device.
  Cost cost() const override {
    double rows = 0, experts = 0;
    for (int64_t r : rows_) {
      rows += double(r);
      experts += r > 0 ? 1 : 0;
    }
    const double n = double(n_), k = double(k_), in = double(dtype_size(in_));
    Cost c;
    c.flops = 2 * rows * n * k;
    c.bytes = experts * n * k * in + rows * k * in + rows * n * 2;
    if (in_ == DType::f8e4m3) c.bytes += experts * std::ceil(n / 128) * (k / 128) * 4 + rows * (k / 128) * 4;
    c.compute = in_ == DType::f8e4m3 ? Unit::mma_fp8 : Unit::dot_bf16;
    c.memory = Unit::mem_read;
    return c;
  }
  int input_sets() const override { return int(a_.size()); }
  void run(int set) override {
    const size_t i = size_t(set);
    GroupedGemmOptions opt;
    const bool fp8 = in_ == DType::f8e4m3;
    if (fp8) opt.b_scales = &b_scales_[i].tensor();
    const int64_t g = int64_t(rows_.size());
    if (!masked_) {
      if (fp8) opt.a_scales = &a_scales_[i].tensor();
      return grouped_gemm_contiguous(a_[i], b_[i], *layout_, d_[i], opt);
    }
    const Tensor sa = fp8 ? a_scales_[i].tensor().reshape({g, max_m_, k_ / kFp8ScaleBlock}) : Tensor();
    if (fp8) opt.a_scales = &sa;
    grouped_gemm_masked(a_[i].tensor().reshape({g, max_m_, k_}), b_[i], *layout_,
                        d_[i].tensor().reshape({g, max_m_, n_}), opt);
  }
  std::string anchor() const override { return anchor_ ? anchor_->describe() : ""; }
  void run_anchor(int set) override {
    sol::check(anchor_.has_value(), kOp, "no anchor was asked for (--anchor cublaslt)");
    anchor_->run(set);
  }
  // Up to 16 rows spread over M (every row of small cases) against the fp64 reference; rows of
  // no expert must still hold the poison.
  CheckResult check() override {
    poison(d_[0].host());
    d_[0].upload();
    run(0);
    d_[0].download();
    // The contiguous layout is read on the device only: its report says whether the kernel ran it.
    if (!masked_) try {
        check_grouped_layouts(device_);
      } catch (const Error& e) {
        return {false, 0.0, 1e-2, e.what()};
      }
    const bool fp8 = in_ == DType::f8e4m3;
    const int64_t samples = std::min<int64_t>(m_, m_ * n_ * k_ > (int64_t(1) << 28) ? 16 : m_);
    CheckResult worst{true, 0.0, 1e-2, ""};
    for (int64_t s = 0; s < samples; ++s) {
      const int64_t r = samples == m_ ? s : s * (m_ - 1) / std::max<int64_t>(1, samples - 1);
      const int64_t e = expert_of_row(r);
      const Tensor got = d_[0].host().tensor().slice(0, r, r + 1);
      if (e < 0) {
        const auto* bytes = static_cast<const uint8_t*>(got.data());
        for (int64_t i = 0; i < n_ * 2; ++i)
          if (bytes[i] != 0xFF) return {false, 0.0, 1e-2, "row " + std::to_string(r) + " belongs to no expert but was written"};
        continue;
      }
      Buffer ref(DType::f32, {1, n_});
      const Tensor sa = fp8 ? a_scales_[0].host().tensor().slice(0, r, r + 1) : Tensor();
      const Tensor sb = fp8 ? plane(b_scales_[0].host().tensor(), e) : Tensor();
      reference_gemm(a_[0].host().tensor().slice(0, r, r + 1), plane(b_[0].host().tensor(), e), Layout::nt, nullptr, 1.0f, 0.0f,
                     nullptr, Activation::none, ref, fp8 ? &sa : nullptr, fp8 ? &sb : nullptr);
      Buffer row(DType::bf16, {1, n_});
      std::memcpy(row.data(), got.data(), size_t(n_) * 2);
      const CheckResult c = compare_relative(row, ref, 1e-2);
      if (!c.pass)
        return {false, c.error, 1e-2, "row " + std::to_string(r) + " (expert " + std::to_string(e) + "): " + c.detail};
      worst.error = std::max(worst.error, c.error);
    }
    worst.detail = std::to_string(samples) + " sampled rows";
    return worst;
  }

 private:
  int64_t expert_of_row(int64_t r) const {
    if (!masked_) return ids_[size_t(r)];
    const int64_t e = r / max_m_;
    return r % max_m_ < rows_[size_t(e)] ? e : -1;
  }

  Device device_;
  std::vector<int64_t> rows_, starts_;  // rows and first row of each expert
  std::vector<int32_t> ids_;            // the contiguous layout's expert per row
  int64_t n_ = 0, k_ = 0, m_ = 0, max_m_ = 0;
  bool masked_ = false;
  DType in_ = DType::bf16;
  std::string scales_;
  std::optional<CaseOperand> layout_;
  std::vector<CaseOperand> a_, b_, d_, a_scales_, b_scales_;
  std::optional<CublasLtAnchorCalls> anchor_;
};

}  // namespace

std::unique_ptr<OpCase> make_grouped_gemm_device_case(const OpParams& p, int64_t cold_bytes) {
  return std::make_unique<GroupedDeviceCase>(p, cold_bytes);
}

}  // namespace sol
