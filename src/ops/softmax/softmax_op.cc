// Registry entry for softmax over the last dimension, checked against an fp64 reference.
#include <cmath>
#include <memory>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/error.h"
#include "sol/registry.h"
#include "sol/softmax.h"

namespace sol {

namespace {

void softmax_reference(const Tensor& x, const Tensor& y) {
  const int64_t n = x.shape(-1), rows = n ? x.numel() / n : 0;
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    bool nan = false;
    for (int64_t i = 0; i < n; ++i) {
      double v = load_as_double(x.data(), x.dtype(), size_t(r * n + i));
      nan |= std::isnan(v);
      mx = std::max(mx, v);
    }
    if (nan) mx = NAN;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(load_as_double(x.data(), x.dtype(), size_t(r * n + i)) - mx);
    for (int64_t i = 0; i < n; ++i)
      store_from_double(y.data(), y.dtype(), size_t(r * n + i),
                        std::exp(load_as_double(x.data(), x.dtype(), size_t(r * n + i)) - mx) / sum);
  }
}

class SoftmaxCase : public OpCase {
 public:
  SoftmaxCase(int64_t rows, int64_t n, DType dt, Device device, int64_t cold_bytes)
      : rows_(rows), n_(n), dt_(dt), device_(device) {
    sol::check(dt == DType::f32 || dt == DType::bf16, "softmax", "--dtype = ", dtype_name(dt), " but must be f32 or bf16");
    for (int i = 0; i < sets_for(2 * rows * n * int64_t(dtype_size(dt)), cold_bytes); ++i) {
      x_.emplace_back(device, dt, std::initializer_list<int64_t>{rows, n});
      y_.emplace_back(device, dt, std::initializer_list<int64_t>{rows, n});
      fill_random(x_.back().host(), 13 + uint64_t(i), 8.0);
      x_.back().upload();
    }
  }
  std::string shape() const override { return "tokens=" + std::to_string(rows_) + " n=" + std::to_string(n_); }
  std::string dtype() const override { return std::string(dtype_name(dt_)); }
  Device device() const override { return device_; }
  Cost cost() const override {
    const double in = double(rows_) * double(n_) * double(dtype_size(dt_));
    return {0, 2 * in, Unit::fma_f32, Unit::mem_copy, in};
  }
  int input_sets() const override { return int(x_.size()); }
  void run(int set) override { softmax(x_[size_t(set)], y_[size_t(set)]); }
  CheckResult check() override {
    if (rows_ > 0 && n_ > 2) {  // masked entries: -inf must get exactly zero probability
      store_from_double(x_[0].host().data(), dt_, 1, -INFINITY);
      store_from_double(x_[0].host().data(), dt_, size_t(n_ + 2), -INFINITY);
      x_[0].upload();
    }
    Buffer ref(dt_, {rows_, n_});
    softmax_reference(x_[0].host(), ref);
    poison(y_[0].host());
    y_[0].upload();
    run(0);
    y_[0].download();
    return compare_relative(y_[0].host(), ref, dt_ == DType::bf16 ? 8e-3 : 1e-6);
  }

 private:
  int64_t rows_, n_;
  DType dt_;
  Device device_;
  std::vector<CaseOperand> x_, y_;
};

}  // namespace

void register_softmax_ops() {
  OpInfo op;
  op.name = "softmax";
  op.rows_param = "tokens";
  op.summary = "softmax over the last dim (f32 statistics; -inf masks to 0, NaN rows stay NaN)";
  op.params = {
      {"tokens", "rows", "4096", ParamSpec::size},
      {"n", "row length", "7168", ParamSpec::size},
      {"dtype", "f32 or bf16", "bf16", ParamSpec::dtype},
      device_param(),
  };
  op.bench_table = {{}, {{"tokens", "16"}}, {{"dtype", "f32"}}};
  op.check_table = {{{"tokens", "1"}, {"n", "1"}},
                    {{"tokens", "3"}, {"n", "17"}, {"dtype", "f32"}},
                    {{"tokens", "9"}, {"n", "7168"}},
                    {{"tokens", "0"}, {"n", "8"}},
                    {{"tokens", "5"}, {"n", "129"}, {"dtype", "f32"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<SoftmaxCase>(p.integer("tokens"), p.integer("n"), p.dtype("dtype"), p.device("device"),
                                         cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
