// `sol bench gemm --device cuda[:N]`: the gemm registry entry's case when its operands live on a
// GPU (gemm_op.cc hands it over). What the device bench takes: B stored [N, K], D = A B^T, no
// epilogue, D bf16; bf16 operands, or fp8 e4m3 with DeepGEMM's recipe (A scaled per 1 x 128, B
// per 128 x 128, f32 or UE8M0 scales made by Sol's quantizer as the CPU case makes them). The
// floor is FLOPs over the dtype's wgmma peak (mma_bf16 or mma_fp8) or bytes over HBM read,
// measured beside the op by `sol bench`. `--anchor cublaslt` times cuBLASLt on the same operands
// right after Sol, on the same row (fp8: its 1x128/128x128 block scaling where it offers it,
// per-tensor otherwise, named in the legend).
#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "ops/common/buffer_sets.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/gemm_device_bench.h"
#include "ops/gemm/reference.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "sol/quant.h"
#include "sol/registry.h"

namespace sol {

namespace {

constexpr const char* kOp = "gemm";

bool is_fp8(const std::string& dtype) { return dtype == "fp8" || dtype == "f8e4m3"; }

// The arguments are checked before the device is looked up, so a request the device path cannot
// take is named as such on any machine; then the device (sol::Error with discovery's reason) and
// what it can run.
Device validated_device(const OpParams& p) {
  const std::string where = p.text("device");
  sol::check(p.integer("m") >= 0 && p.integer("n") >= 0 && p.integer("k") >= 0, kOp, "m, n, k must be >= 0");
  const std::string& dtype = p.text("dtype");
  const bool fp8 = is_fp8(dtype);
  sol::check(dtype == "bf16" || fp8, kOp, "--dtype = ", dtype, " but on ", where, " the GEMM takes bf16 or fp8");
  sol::check(!fp8 || p.integer("k") % kFp8ScaleBlock == 0, kOp, "--k = ", p.integer("k"),
             " but fp8 block scales need k % 128 == 0");
  parse_gemm_scales(kOp, p.text("scales"), fp8);
  sol::check(p.text("layout") == "nt", kOp, "--layout = ", p.text("layout"), " but on ", where,
             " B is stored [N, K] as weights are: --layout nt");
  sol::check(p.integer("packed") == 0, kOp, "--packed 1 but on ", where, " B is read as stored (no pack_b)");
  sol::check(p.text("alpha") == "1" && p.text("beta") == "0" && p.integer("bias") == 0 && p.text("act") == "none",
             kOp, "on ", where, " the GEMM bench has no alpha/beta/bias/activation epilogue");
  sol::check(p.text("out") == "auto" || p.text("out") == "bf16", kOp, "--out = ", p.text("out"), " but on ", where,
             " D is bf16");
  parse_device_gemm_anchor(kOp, p.text("anchor"));
  const Device d = p.device("device");
  const CudaDeviceInfo& info = cuda_device(d.index);
  check_device_gemm_arch(kOp, d, info.cc_major, info.cc_minor, fp8);
  return d;
}

class GemmDeviceCase : public OpCase {
 public:
  GemmDeviceCase(const OpParams& p, int64_t cold_bytes) : device_(validated_device(p)) {
    m_ = p.integer("m");
    n_ = p.integer("n");
    k_ = p.integer("k");
    in_ = is_fp8(p.text("dtype")) ? DType::f8e4m3 : DType::bf16;
    const bool fp8 = in_ == DType::f8e4m3;
    QuantOptions quant;
    quant.scale = parse_gemm_scales(kOp, p.text("scales"), fp8);
    const int64_t kb = k_ / kFp8ScaleBlock, nb = (n_ + kFp8ScaleBlock - 1) / kFp8ScaleBlock;
    const std::optional<CublasLtFp8Scaling> scaling = requested_anchor_scaling(kOp, p.text("anchor"), device_, fp8);
    const int64_t set_bytes = int64_t(cost().bytes);
    // The shapes are made once, outside the loop: with the lists written inside it, GCC 12.2 at
    // -O2/-O3 stored A's {m, k} from a zeroed register on the path where the loop runs more than
    // once, so every set's A was [0, 0] (device cases always rotate sets). GCC -O1 and clang -O3
    // built it right.
    const std::array<int64_t, 2> a_shape{m_, k_}, b_shape{n_, k_}, d_shape{m_, n_};
    for (int i = 0; i < sets_for(set_bytes, cold_bytes); ++i) {
      const uint64_t seed = 1000 * uint64_t(i);
      a_.emplace_back(device_, in_, std::span<const int64_t>(a_shape));
      b_.emplace_back(device_, in_, std::span<const int64_t>(b_shape));
      d_.emplace_back(device_, DType::bf16, std::span<const int64_t>(d_shape));
      // fp8 through Sol's own DeepSeek quantizer, as the CPU case: real codes and scales.
      if (fp8) {
        Buffer fa(DType::f32, {m_, k_}), fb(DType::f32, {n_, k_});
        fill_random(fa, seed + 1, 2.0);
        fill_random(fb, seed + 2, 0.1);
        a_scales_.emplace_back(device_, DType::f32, std::initializer_list<int64_t>{m_, kb});
        b_scales_.emplace_back(device_, DType::f32, std::initializer_list<int64_t>{nb, kb});
        quant_fp8_per_token(fa, a_.back().host(), a_scales_.back().host(), quant);
        quant_fp8_per_block(fb, b_.back().host(), b_scales_.back().host(), quant);
        a_scales_.back().upload();
        b_scales_.back().upload();
      } else {
        fill_random(a_.back().host(), seed + 1, 1.0);
        fill_random(b_.back().host(), seed + 2, 1.0);
      }
      a_.back().upload();
      b_.back().upload();
      if (scaling) {
        if (!anchor_) anchor_.emplace(device_, in_, *scaling);
        anchor_->add(i, a_.back(), b_.back(), d_.back(), fp8 ? &a_scales_.back().host().tensor() : nullptr,
                     fp8 ? &b_scales_.back().host().tensor() : nullptr);
      }
    }
    scales_ = p.text("scales");
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "m=" << m_ << ",n=" << n_ << ",k=" << k_ << ",nt";
    if (in_ == DType::f8e4m3 && scales_ != "f32") os << "," << scales_;
    return os.str();
  }
  std::string dtype() const override { return in_ == DType::bf16 ? "bf16->bf16" : "f8e4m3->bf16"; }
  Device device() const override { return device_; }
  Cost cost() const override {
    const double m = double(m_), n = double(n_), k = double(k_), in = double(dtype_size(in_));
    Cost c;
    c.flops = 2 * m * n * k;
    c.bytes = in * (m * k + n * k) + 2 * m * n;
    if (in_ == DType::f8e4m3) c.bytes += 4 * (m * (k / 128) + std::ceil(n / 128) * (k / 128));
    // The device's wgmma peak of the dtype (gpu_ceiling_for: dot_bf16 -> mma_bf16).
    c.compute = in_ == DType::f8e4m3 ? Unit::mma_fp8 : Unit::dot_bf16;
    c.memory = Unit::mem_read;  // HBM read
    return c;
  }
  int input_sets() const override { return int(a_.size()); }
  void run(int set) override {
    const size_t i = size_t(set);
    GemmOptions opt;
    opt.layout = Layout::nt;
    if (in_ == DType::f8e4m3) {
      opt.a_scales = &a_scales_[i].tensor();
      opt.b_scales = &b_scales_[i].tensor();
    }
    gemm(a_[i], b_[i], d_[i], opt);
  }
  std::string anchor() const override { return anchor_ ? anchor_->describe() : ""; }
  void run_anchor(int set) override {
    sol::check(anchor_.has_value(), kOp, "no anchor was asked for (--anchor cublaslt)");
    anchor_->run(set);
  }
  CheckResult check() override {
    poison(d_[0].host());
    d_[0].upload();
    run(0);
    d_[0].download();
    // As the CPU case: a fixed sample of rows of large shapes, every row of small ones.
    const int64_t rows = m_ * n_ * k_ > (int64_t(1) << 28) ? std::min<int64_t>(m_, 8) : m_;
    Buffer ref(DType::f32, {rows, n_}), got(DType::bf16, {rows, n_});
    const bool fp8 = in_ == DType::f8e4m3;
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t r = rows == m_ ? i : (rows == 1 ? 0 : i * (m_ - 1) / (rows - 1));
      const Tensor sa = fp8 ? a_scales_[0].host().tensor().slice(0, r, r + 1) : Tensor();
      reference_gemm(a_[0].host().tensor().slice(0, r, r + 1), b_[0].host(), Layout::nt, nullptr, 1.0f, 0.0f, nullptr,
                     Activation::none, ref.tensor().slice(0, i, i + 1), fp8 ? &sa : nullptr,
                     fp8 ? &b_scales_[0].host().tensor() : nullptr);
      transfer(d_[0].host().tensor().slice(0, r, r + 1), got.tensor().slice(0, i, i + 1));
    }
    CheckResult c = compare_relative(got, ref, 1e-2);
    std::ostringstream os;
    if (rows < m_) os << rows << " sampled rows; ";
    os << "diff (1 - 2sum(xy)/sum(x^2+y^2)) = " << gemm_diff_metric(got, ref);
    c.detail = c.detail.empty() ? os.str() : c.detail + "; " + os.str();
    return c;
  }

 private:
  Device device_;
  int64_t m_ = 0, n_ = 0, k_ = 0;
  DType in_ = DType::bf16;
  std::string scales_;
  std::vector<CaseOperand> a_, b_, d_, a_scales_, b_scales_;
  std::optional<CublasLtAnchorCalls> anchor_;
};

}  // namespace

std::unique_ptr<OpCase> make_gemm_device_case(const OpParams& p, int64_t cold_bytes) {
  return std::make_unique<GemmDeviceCase>(p, cold_bytes);
}

}  // namespace sol
