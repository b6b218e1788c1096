// Registry entry for quant-fp8: per-token, per-block and dequantization, checked bit for bit
// against the separately written reference.
#include <memory>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/quant/reference.h"
#include "sol/activation.h"
#include "sol/error.h"
#include "sol/quant.h"
#include "sol/registry.h"

namespace sol {

namespace {

enum class Mode { token, block, dequant };

Mode parse_mode(const std::string& s) {
  if (s == "token") return Mode::token;
  if (s == "block") return Mode::block;
  if (s == "dequant") return Mode::dequant;
  fail("quant-fp8", "--mode = '", s, "' but expected token, block or dequant");
}

// The values quantized: uniform in [-3, 3], or an activation's output, GELU (tanh) of uniform
// [-6, 6] inputs: its negative tail puts ~18% of the values below 2^-6 of their group's maximum,
// e4m3's subnormal range, which real MLP activations reach as well.
bool parse_values(const std::string& s) {
  if (s == "uniform") return false;
  if (s == "gelu") return true;
  fail("quant-fp8", "--values = '", s, "' but expected uniform or gelu");
}

ScaleFormat parse_scale(const std::string& s) {
  if (s == "f32") return ScaleFormat::f32;
  if (s == "ue8m0") return ScaleFormat::ue8m0;
  fail("quant-fp8", "--scale = '", s, "' but expected f32 or ue8m0");
}

class QuantCase : public OpCase {
 public:
  QuantCase(int64_t rows, int64_t cols, DType dtype, Mode mode, ScaleFormat scale, bool gelu_values, Device device,
            int64_t cold_bytes)
      : rows_(rows), cols_(cols), dtype_(dtype), mode_(mode), gelu_values_(gelu_values), device_(device) {
    opt_.scale = scale;
    sol::check(dtype == DType::f32 || dtype == DType::bf16, "quant-fp8", "--dtype = ", dtype_name(dtype),
               " but must be f32 or bf16");
    sol::check(cols % 128 == 0, "quant-fp8", "--hidden = ", cols, " but must be a multiple of 128");
    const int64_t srows = mode == Mode::block ? (rows + 127) / 128 : rows;
    int64_t set_bytes = rows * cols * int64_t(dtype_size(dtype) + 1);
    for (int i = 0; i < sets_for(set_bytes, cold_bytes); ++i) {
      x_.emplace_back(device, dtype, std::initializer_list<int64_t>{rows, cols});
      q_.emplace_back(device, DType::f8e4m3, std::initializer_list<int64_t>{rows, cols});
      s_.emplace_back(device, DType::f32, std::initializer_list<int64_t>{srows, cols / 128});
      fill_random(x_.back().host(), 11 + uint64_t(i), gelu_values ? 6.0 : 3.0);
      if (gelu_values) gelu(x_.back().host(), x_.back().host(), GeluForm::tanh);
      if (mode == Mode::dequant) quant_fp8_per_token(x_.back().host(), q_.back().host(), s_.back().host(), opt_);
      x_.back().upload(), q_.back().upload(), s_.back().upload();
    }
  }
  std::string shape() const override {
    return "tokens=" + std::to_string(rows_) + " hidden=" + std::to_string(cols_);
  }
  std::string dtype() const override {
    std::string d(dtype_name(dtype_));
    std::string m = mode_ == Mode::token ? "token" : mode_ == Mode::block ? "block" : "dequant";
    std::string s = opt_.scale == ScaleFormat::f32 ? "" : " ue8m0";
    return (mode_ == Mode::dequant ? "f8e4m3->" + d : d + "->f8e4m3 " + m + s) + (gelu_values_ ? " gelu-values" : "");
  }
  Device device() const override { return device_; }
  Cost cost() const override {
    double n = double(rows_) * double(cols_);
    double scales = double(s_[0].host().tensor().numel()) * 4;
    // quant reads the wide values; dequant reads the codes and their scales.
    double read = mode_ == Mode::dequant ? n + scales : n * double(dtype_size(dtype_));
    return {0, n * double(dtype_size(dtype_) + 1) + scales, Unit::fma_f32, Unit::mem_copy, read};
  }
  int input_sets() const override { return int(x_.size()); }
  void run(int set) override {
    size_t i = size_t(set);
    if (mode_ == Mode::token) quant_fp8_per_token(x_[i], q_[i], s_[i], opt_);
    else if (mode_ == Mode::block) quant_fp8_per_block(x_[i], q_[i], s_[i], opt_);
    else dequant_fp8_per_token(q_[i], s_[i], x_[i], opt_);
  }
  CheckResult check() override {
    if (mode_ == Mode::dequant) {
      Buffer ref(dtype_, {rows_, cols_});
      reference::dequant_fp8_per_token(q_[0].host(), s_[0].host(), ref, opt_);
      poison(x_[0].host());
      x_[0].upload();
      run(0);
      x_[0].download();
      return compare_bitwise(x_[0].host(), ref);
    }
    const Buffer& x = x_[0].host();
    fill_random_with_specials(x, 5, 4096);  // a few groups with NaN/Inf, most without
    if (gelu_values_) gelu(x, x, GeluForm::tanh);
    x_[0].upload();
    Buffer qref(DType::f8e4m3, {rows_, cols_});
    Buffer sref(DType::f32, {s_[0].host().tensor().shape(0), s_[0].host().tensor().shape(1)});
    if (mode_ == Mode::token) reference::quant_fp8_per_token(x, qref, sref, opt_);
    else reference::quant_fp8_per_block(x, qref, sref, opt_);
    poison(q_[0].host());
    poison(s_[0].host());
    q_[0].upload(), s_[0].upload();
    run(0);
    q_[0].download(), s_[0].download();
    return compare_quantized(q_[0].host(), s_[0].host(), qref, sref);
  }

 private:
  int64_t rows_, cols_;
  DType dtype_;
  Mode mode_;
  bool gelu_values_;
  QuantOptions opt_;
  Device device_;
  std::vector<CaseOperand> x_, q_, s_;
};

}  // namespace

void register_quant_ops() {
  OpInfo op;
  op.name = "quant-fp8";
  op.rows_param = "tokens";
  op.summary = "DeepSeek FP8 quantization: e4m3 with f32 or UE8M0 scales per 1x128 (token) or 128x128 (block)";
  op.params = {
      {"tokens", "rows (tokens, or weight rows N for --mode block)", "4096", ParamSpec::size},
      {"hidden", "columns, a multiple of 128", "7168", ParamSpec::size},
      {"dtype", "input (output for dequant) dtype: f32 or bf16", "bf16", ParamSpec::dtype},
      {"mode", "token | block | dequant", "token", ParamSpec::text},
      {"scale", "f32 | ue8m0 (power-of-two scales)", "f32", ParamSpec::text},
      {"values", "uniform (in [-3, 3]) | gelu (GELU of uniform [-6, 6]: many values in e4m3's subnormal range)",
       "uniform", ParamSpec::text},
      device_param(),
  };
  op.bench_table = {{}, {{"tokens", "16"}}, {{"scale", "ue8m0"}}, {{"mode", "block"}}, {{"mode", "dequant"}}, {{"values", "gelu"}}};
  op.check_table = {{{"tokens", "1"}, {"hidden", "128"}},
                    {{"tokens", "17"}, {"hidden", "384"}, {"dtype", "f32"}},
                    {{"tokens", "33"}, {"hidden", "7168"}, {"scale", "ue8m0"}},
                    {{"tokens", "300"}, {"hidden", "256"}, {"mode", "block"}},
                    {{"tokens", "129"}, {"hidden", "512"}, {"mode", "block"}, {"scale", "ue8m0"}, {"dtype", "f32"}},
                    {{"tokens", "0"}, {"hidden", "128"}},
                    {{"tokens", "19"}, {"hidden", "896"}, {"mode", "dequant"}},
                    {{"tokens", "23"}, {"hidden", "1024"}, {"values", "gelu"}},
                    {{"tokens", "130"}, {"hidden", "512"}, {"mode", "block"}, {"values", "gelu"}, {"scale", "ue8m0"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<QuantCase>(p.integer("tokens"), p.integer("hidden"), p.dtype("dtype"),
                                       parse_mode(p.text("mode")), parse_scale(p.text("scale")),
                                       parse_values(p.text("values")), p.device("device"), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
