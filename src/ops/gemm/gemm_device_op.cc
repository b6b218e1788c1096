// `sol bench gemm --device cuda[:N]`: the gemm registry entry's case when its operands live on a
// GPU (gemm_op.cc hands it over). What the device path takes (B stored [N, K], D = A B^T, no
// epilogue, D bf16), bf16 operands; `--anchor cublaslt` times cuBLASLt on the same operands
// instead of Sol, held to the same floor (mma_bf16 and HBM read, measured beside it by `sol
// bench`), so the two records of one shape read side by side. fp8 is not here: its floor needs
// the fp8 tensor-core peak, which no sol::Unit names yet (sol_gpu_tests bench_gemm holds fp8 to
// it, with both anchors, in scripts/device-check.sh).
#include <algorithm>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ops/common/buffer_sets.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/cublaslt_anchor.h"
#include "ops/gemm/reference.h"
#include "sol/error.h"
#include "sol/gemm.h"
#include "sol/registry.h"

namespace sol {

namespace {

constexpr const char* kOp = "gemm";

// The arguments are checked before the device is looked up, so a request the device path cannot
// take is named as such on any machine; then the device (sol::Error with discovery's reason).
Device validated_device(const OpParams& p) {
  const std::string where = p.text("device");
  sol::check(p.integer("m") >= 0 && p.integer("n") >= 0 && p.integer("k") >= 0, kOp, "m, n, k must be >= 0");
  const std::string& dtype = p.text("dtype");
  sol::check(dtype != "fp8" && dtype != "f8e4m3", kOp, "--dtype = ", dtype, " on ", where,
             ": the fp8 floor needs the fp8 tensor-core peak (mma_fp8), which sol::Unit cannot name yet; "
             "`sol_gpu_tests bench_gemm` (scripts/device-check.sh) times fp8 against it");
  sol::check(dtype == "bf16", kOp, "--dtype = ", dtype, " but on ", where, " the GEMM takes bf16 (fp8 in bench_gemm)");
  sol::check(p.text("layout") == "nt", kOp, "--layout = ", p.text("layout"), " but on ", where,
             " B is stored [N, K] as weights are: --layout nt");
  sol::check(p.integer("packed") == 0, kOp, "--packed 1 but on ", where, " B is read as stored (no pack_b)");
  sol::check(p.text("alpha") == "1" && p.text("beta") == "0" && p.integer("bias") == 0 && p.text("act") == "none",
             kOp, "on ", where, " the GEMM has no alpha/beta/bias/activation epilogue yet");
  sol::check(p.text("out") == "auto" || p.text("out") == "bf16", kOp, "--out = ", p.text("out"), " but on ", where,
             " D is bf16");
  const std::string& anchor = p.text("anchor");
  sol::check(anchor == "sol" || anchor == "cublaslt", kOp, "--anchor = ", anchor, " but must be sol or cublaslt");
  return p.device("device");
}

class GemmDeviceCase : public OpCase {
 public:
  GemmDeviceCase(const OpParams& p, int64_t cold_bytes) : device_(validated_device(p)) {
    m_ = p.integer("m");
    n_ = p.integer("n");
    k_ = p.integer("k");
    const int64_t set_bytes = int64_t(cost().bytes);
    for (int i = 0; i < sets_for(set_bytes, cold_bytes); ++i) {
      const uint64_t seed = 1000 * uint64_t(i);
      a_.emplace_back(device_, DType::bf16, std::initializer_list<int64_t>{m_, k_});
      b_.emplace_back(device_, DType::bf16, std::initializer_list<int64_t>{n_, k_});
      d_.emplace_back(device_, DType::bf16, std::initializer_list<int64_t>{m_, n_});
      fill_random(a_.back().host(), seed + 1, 1.0);
      fill_random(b_.back().host(), seed + 2, 1.0);
      a_.back().upload();
      b_.back().upload();
    }
    if (p.text("anchor") == "cublaslt")
      anchor_.emplace(device_, CublasLtProblem{DType::bf16, m_, n_, k_, CublasLtFp8Scaling::none});
  }

  std::string shape() const override {
    std::ostringstream os;
    os << "m=" << m_ << ",n=" << n_ << ",k=" << k_ << ",nt";
    if (anchor_) os << ",anchor=" << anchor_->describe();
    return os.str();
  }
  std::string dtype() const override { return "bf16->bf16"; }
  Device device() const override { return device_; }
  Cost cost() const override {
    const double m = double(m_), n = double(n_), k = double(k_);
    Cost c;
    c.flops = 2 * m * n * k;
    c.bytes = 2 * (m * k + n * k + m * n);
    c.compute = Unit::dot_bf16;  // the device's bf16 wgmma peak (gpu_ceiling_for)
    c.memory = Unit::mem_read;   // HBM read
    return c;
  }
  int input_sets() const override { return int(a_.size()); }
  void run(int set) override {
    const size_t i = size_t(set);
    if (anchor_) return anchor_->run(a_[i], b_[i], d_[i]);
    GemmOptions opt;
    opt.layout = Layout::nt;
    gemm(a_[i], b_[i], d_[i], opt);
  }
  CheckResult check() override {
    poison(d_[0].host());
    d_[0].upload();
    run(0);
    d_[0].download();
    // As the CPU case: a fixed sample of rows of large shapes, every row of small ones.
    const int64_t rows = m_ * n_ * k_ > (int64_t(1) << 28) ? std::min<int64_t>(m_, 8) : m_;
    Buffer ref(DType::f32, {rows, n_}), got(DType::bf16, {rows, n_});
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t r = rows == m_ ? i : (rows == 1 ? 0 : i * (m_ - 1) / (rows - 1));
      reference_gemm(a_[0].host().tensor().slice(0, r, r + 1), b_[0].host(), Layout::nt, nullptr, 1.0f, 0.0f, nullptr,
                     Activation::none, ref.tensor().slice(0, i, i + 1));
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
  std::vector<CaseOperand> a_, b_, d_;
  std::optional<CublasLtGemm> anchor_;
};

}  // namespace

std::unique_ptr<OpCase> make_gemm_device_case(const OpParams& p, int64_t cold_bytes) {
  return std::make_unique<GemmDeviceCase>(p, cold_bytes);
}

}  // namespace sol
