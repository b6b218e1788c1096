// Registry entry for gelu (tanh and erf forms), plain or fused with FP8 quantization.
#include <cmath>
#include <memory>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/activation.h"
#include "sol/error.h"
#include "sol/registry.h"

namespace sol {

namespace {

void gelu_reference(const Tensor& x, const Tensor& y, GeluForm form) {
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = load_as_double(x.data(), x.dtype(), size_t(i));
    // 1 + erf(z) = erfc(-z) and 1 + tanh(u) = 2 / (1 + e^-2u): exact identities that do not
    // cancel in the negative tail, even in double.
    double g = form == GeluForm::erf ? 0.5 * v * std::erfc(-v / std::sqrt(2.0))
                                     : v / (1.0 + std::exp(-2.0 * std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    store_from_double(y.data(), y.dtype(), size_t(i), g);
  }
}

class GeluCase : public OpCase {
 public:
  GeluCase(int64_t rows, int64_t h, DType dt, GeluForm form, bool quant, Device device, int64_t cold_bytes)
      : rows_(rows), h_(h), dt_(dt), form_(form), quant_(quant), device_(device) {
    sol::check(dt == DType::f32 || dt == DType::bf16, "gelu", "--dtype = ", dtype_name(dt), " but must be f32 or bf16");
    const int64_t es = int64_t(dtype_size(dt));
    for (int i = 0; i < sets_for(rows * h * (es + (quant ? 1 : es)), cold_bytes); ++i) {
      x_.emplace_back(device, dt, std::initializer_list<int64_t>{rows, h});
      fill_random(x_.back().host(), 23 + uint64_t(i), 6.0);
      x_.back().upload();
      y_.emplace_back(device, quant ? DType::f8e4m3 : dt, std::initializer_list<int64_t>{rows, h});
      if (quant) s_.emplace_back(device, DType::f32, std::initializer_list<int64_t>{rows, h / 128});
    }
  }
  std::string shape() const override { return "tokens=" + std::to_string(rows_) + " hidden=" + std::to_string(h_); }
  std::string dtype() const override {
    return std::string(dtype_name(dt_)) + (quant_ ? "->f8e4m3" : "") + (form_ == GeluForm::erf ? " erf" : " tanh");
  }
  Device device() const override { return device_; }
  Cost cost() const override {
    double n = double(rows_) * double(h_), es = double(dtype_size(dt_));
    return {0, n * es + (quant_ ? n + n / 32 : n * es), Unit::fma_f32, Unit::mem_copy, n * es};
  }
  int input_sets() const override { return int(x_.size()); }
  void run(int set) override {
    size_t i = size_t(set);
    if (quant_) gelu_quant_fp8(x_[i], y_[i], s_[i], form_);
    else gelu(x_[i], y_[i], form_);
  }
  CheckResult check() override {
    if (quant_)
      return check_fused_quant(
          device_, rows_, h_, [&](const Tensor& act) { gelu(x_[0], act, form_); },
          [&](const Tensor& act) {
            Buffer ref(DType::bf16, {rows_, h_});
            gelu_reference(x_[0].host(), ref, form_);
            return compare_relative(act, ref, 1e-2);
          },
          [&] {
            y_[0].upload(), s_[0].upload();
            run(0);
            y_[0].download(), s_[0].download();
          },
          y_[0].host(), s_[0].host());
    Buffer ref(dt_, {rows_, h_});
    gelu_reference(x_[0].host(), ref, form_);
    poison(y_[0].host());
    y_[0].upload();
    run(0);
    y_[0].download();
    return compare_relative(y_[0].host(), ref, dt_ == DType::bf16 ? 1e-2 : 2e-6);
  }

 private:
  int64_t rows_, h_;
  DType dt_;
  GeluForm form_;
  bool quant_;
  Device device_;
  std::vector<CaseOperand> x_, y_, s_;
};

}  // namespace

void register_gelu_ops() {
  OpInfo op;
  op.name = "gelu";
  op.rows_param = "tokens";
  op.summary = "GELU, tanh or erf form, optionally fused with per-token FP8 quantization";
  op.params = {
      {"tokens", "rows", "4096", ParamSpec::size},
      {"hidden", "row length", "7168", ParamSpec::size},
      {"dtype", "f32 or bf16", "bf16", ParamSpec::dtype},
      {"form", "tanh | erf", "tanh", ParamSpec::text},
      {"quant", "1: fuse per-token FP8 quantization", "0", ParamSpec::integer},
      device_param(),
  };
  op.bench_table = {{{"form", "erf"}}, {{"quant", "1"}}};
  op.check_table = {{{"tokens", "1"}, {"hidden", "1"}},
                    {{"tokens", "7"}, {"hidden", "19"}, {"dtype", "f32"}},
                    {{"tokens", "7"}, {"hidden", "19"}, {"dtype", "f32"}, {"form", "erf"}},
                    {{"tokens", "33"}, {"hidden", "2048"}, {"form", "erf"}},
                    {{"tokens", "0"}, {"hidden", "8"}},
                    {{"tokens", "21"}, {"hidden", "1536"}, {"quant", "1"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    const std::string& f = p.text("form");
    sol::check(f == "tanh" || f == "erf", "gelu", "--form = '", f, "' but expected tanh or erf");
    int64_t quant = p.integer("quant");
    sol::check(quant == 0 || quant == 1, "gelu", "--quant = ", quant, " but must be 0 or 1");
    return std::make_unique<GeluCase>(p.integer("tokens"), p.integer("hidden"), p.dtype("dtype"),
                                      f == "erf" ? GeluForm::erf : GeluForm::tanh, quant == 1,
                                      p.device("device"), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
