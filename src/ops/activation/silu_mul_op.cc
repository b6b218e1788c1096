// Registry entry for silu-mul (SwiGLU gate), plain or fused with FP8 quantization.
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

// fp64 reference: silu(g) * u, rounded once to y's dtype.
void silu_mul_reference(const Tensor& gu, const Tensor& y) {
  const int64_t rows = gu.shape(0), inter = gu.shape(1) / 2;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < inter; ++c) {
      double g = load_as_double(gu.data(), gu.dtype(), size_t(r * 2 * inter + c));
      double u = load_as_double(gu.data(), gu.dtype(), size_t(r * 2 * inter + inter + c));
      store_from_double(y.data(), y.dtype(), size_t(r * inter + c), g / (1.0 + std::exp(-g)) * u);
    }
}

class SiluMulCase : public OpCase {
 public:
  SiluMulCase(int64_t rows, int64_t inter, DType dt, bool quant, Device device, int64_t cold_bytes)
      : rows_(rows), inter_(inter), dt_(dt), quant_(quant), device_(device) {
    sol::check(dt == DType::f32 || dt == DType::bf16, "silu-mul", "--dtype = ", dtype_name(dt), " but must be f32 or bf16");
    int64_t es = int64_t(dtype_size(dt));
    int64_t set_bytes = rows * inter * (2 * es + (quant ? 1 : es));
    for (int i = 0; i < sets_for(set_bytes, cold_bytes); ++i) {
      gu_.emplace_back(device, dt, std::initializer_list<int64_t>{rows, 2 * inter});
      fill_random(gu_.back().host(), 71 + uint64_t(i), 6.0);
      gu_.back().upload();
      y_.emplace_back(device, quant ? DType::f8e4m3 : dt, std::initializer_list<int64_t>{rows, inter});
      if (quant) s_.emplace_back(device, DType::f32, std::initializer_list<int64_t>{rows, inter / 128});
    }
  }
  std::string shape() const override { return "tokens=" + std::to_string(rows_) + " inter=" + std::to_string(inter_); }
  std::string dtype() const override { return std::string(dtype_name(dt_)) + (quant_ ? "->f8e4m3" : ""); }
  Device device() const override { return device_; }
  Cost cost() const override {
    double n = double(rows_) * double(inter_), es = double(dtype_size(dt_));
    return {0, n * 2 * es + (quant_ ? n + n / 32 : n * es), Unit::fma_f32, Unit::mem_copy, n * 2 * es};
  }
  int input_sets() const override { return int(gu_.size()); }
  void run(int set) override {
    size_t i = size_t(set);
    if (quant_) silu_mul_quant_fp8(gu_[i], y_[i], s_[i]);
    else silu_mul(gu_[i], y_[i]);
  }
  CheckResult check() override {
    if (quant_)
      return check_fused_quant(
          device_, rows_, inter_, [&](const Tensor& act) { silu_mul(gu_[0], act); },
          [&](const Tensor& act) {
            Buffer ref(DType::bf16, {rows_, inter_});
            silu_mul_reference(gu_[0].host(), ref);
            return compare_relative(act, ref, 8e-3);
          },
          [&] {
            y_[0].upload(), s_[0].upload();
            run(0);
            y_[0].download(), s_[0].download();
          },
          y_[0].host(), s_[0].host());
    Buffer ref(dt_, {rows_, inter_});
    silu_mul_reference(gu_[0].host(), ref);
    poison(y_[0].host());
    y_[0].upload();
    run(0);
    y_[0].download();
    return compare_relative(y_[0].host(), ref, dt_ == DType::bf16 ? 8e-3 : 1e-6);
  }

 private:
  int64_t rows_, inter_;
  DType dt_;
  bool quant_;
  Device device_;
  std::vector<CaseOperand> gu_, y_, s_;
};

}  // namespace

void register_activation_ops() {
  OpInfo op;
  op.name = "silu-mul";
  op.rows_param = "tokens";
  op.summary = "SwiGLU gate: y = silu(gate) * up over [tokens, 2*inter], optionally fused with FP8 quant";
  op.params = {
      {"tokens", "rows", "4096", ParamSpec::size},
      {"inter", "intermediate size (y's row length)", "7168", ParamSpec::size},
      {"dtype", "f32 or bf16", "bf16", ParamSpec::dtype},
      {"quant", "1: fuse per-token FP8 quantization of y", "0", ParamSpec::integer},
      device_param(),
  };
  op.bench_table = {{}, {{"tokens", "16"}}, {{"quant", "1"}}};
  op.check_table = {{{"tokens", "1"}, {"inter", "1"}},
                    {{"tokens", "7"}, {"inter", "19"}, {"dtype", "f32"}},
                    {{"tokens", "33"}, {"inter", "2048"}},
                    {{"tokens", "0"}, {"inter", "8"}},
                    {{"tokens", "21"}, {"inter", "1536"}, {"quant", "1"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    int64_t quant = p.integer("quant");
    sol::check(quant == 0 || quant == 1, "silu-mul", "--quant = ", quant, " but must be 0 or 1");
    return std::make_unique<SiluMulCase>(p.integer("tokens"), p.integer("inter"), p.dtype("dtype"), quant == 1,
                                         p.device("device"), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
