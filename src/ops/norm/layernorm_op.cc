// Registry entry for layernorm, checked against the fp64 reference.
#include <memory>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/norm/reference.h"
#include "sol/error.h"
#include "sol/norm.h"
#include "sol/registry.h"

namespace sol {

namespace {

class LayerNormCase : public OpCase {
 public:
  LayerNormCase(int64_t rows, int64_t h, DType dt, bool bias, int64_t cold_bytes)
      : rows_(rows), h_(h), dt_(dt), has_bias_(bias), w_(dt, {h}), b_(dt, {h}) {
    sol::check(dt == DType::f32 || dt == DType::bf16, "layernorm", "--dtype = ", dtype_name(dt), " but must be f32 or bf16");
    fill_random(w_, 8, 2.0);
    fill_random(b_, 9, 1.0);
    for (int i = 0; i < sets_for(2 * rows * h * int64_t(dtype_size(dt)), cold_bytes); ++i) {
      x_.emplace_back(dt, std::initializer_list<int64_t>{rows, h});
      y_.emplace_back(dt, std::initializer_list<int64_t>{rows, h});
      fill_random(x_.back(), 41 + uint64_t(i), 3.0);
    }
  }
  std::string shape() const override { return "tokens=" + std::to_string(rows_) + " hidden=" + std::to_string(h_); }
  std::string dtype() const override { return std::string(dtype_name(dt_)) + (has_bias_ ? " +bias" : ""); }
  Cost cost() const override {
    double n = double(rows_) * double(h_), es = double(dtype_size(dt_));
    const double params = double(h_) * es * (has_bias_ ? 2 : 1);
    return {0, 2 * n * es + params, Unit::fma_f32, Unit::mem_copy, n * es + params};
  }
  int input_sets() const override { return int(x_.size()); }
  void run(int set) override { layernorm(x_[size_t(set)], w_, has_bias_ ? &b_.tensor() : nullptr, y_[size_t(set)]); }
  CheckResult check() override {
    Buffer ref(dt_, {rows_, h_});
    reference::layernorm(x_[0], w_, has_bias_ ? &b_.tensor() : nullptr, ref, 1e-6);
    poison(y_[0]);
    run(0);
    return compare_relative(y_[0], ref, dt_ == DType::bf16 ? 8e-3 : 1e-5);
  }

 private:
  int64_t rows_, h_;
  DType dt_;
  bool has_bias_;
  Buffer w_, b_;
  std::vector<Buffer> x_, y_;
};

}  // namespace

void register_layernorm_ops() {
  OpInfo op;
  op.name = "layernorm";
  op.rows_param = "tokens";
  op.summary = "LayerNorm over the last dim (f32 mean and variance in one shifted pass), optional bias";
  op.params = {
      {"tokens", "rows", "4096", ParamSpec::size},
      {"hidden", "row length", "7168", ParamSpec::size},
      {"dtype", "f32 or bf16", "bf16", ParamSpec::dtype},
      {"bias", "1: add a bias", "1", ParamSpec::integer},
  };
  op.bench_table = {{}, {{"tokens", "16"}}};
  op.check_table = {{{"tokens", "1"}, {"hidden", "1"}},
                    {{"tokens", "7"}, {"hidden", "13"}, {"dtype", "f32"}},
                    {{"tokens", "33"}, {"hidden", "7168"}, {"bias", "0"}},
                    {{"tokens", "0"}, {"hidden", "64"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    int64_t b = p.integer("bias");
    sol::check(b == 0 || b == 1, "layernorm", "--bias = ", b, " but must be 0 or 1");
    return std::make_unique<LayerNormCase>(p.integer("tokens"), p.integer("hidden"), p.dtype("dtype"), b == 1, cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
