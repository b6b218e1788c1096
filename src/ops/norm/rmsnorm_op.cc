// Registry entry for rmsnorm and its fusions (residual add, FP8 quantization of the output).
#include <memory>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/norm/reference.h"
#include "sol/error.h"
#include "sol/norm.h"
#include "sol/registry.h"

namespace sol {

namespace {

enum class Fuse { none, residual, quant };

Fuse parse_fuse(const std::string& s) {
  if (s == "none") return Fuse::none;
  if (s == "residual") return Fuse::residual;
  if (s == "quant") return Fuse::quant;
  fail("rmsnorm", "--fuse = '", s, "' but expected none, residual or quant");
}

double tolerance(DType out) { return out == DType::bf16 ? 8e-3 : 1e-5; }

class RmsNormCase : public OpCase {
 public:
  RmsNormCase(int64_t rows, int64_t h, DType dt, Fuse fuse, Device device, int64_t cold_bytes)
      : rows_(rows), h_(h), dt_(dt), fuse_(fuse), device_(device), w_(device, dt, {h}) {
    sol::check(dt == DType::f32 || dt == DType::bf16, "rmsnorm", "--dtype = ", dtype_name(dt),
               " but must be f32 or bf16");
    fill_random(w_.host(), 99, 2.0);
    w_.upload();
    int64_t es = int64_t(dtype_size(dt));
    int64_t set_bytes = rows * h * (fuse == Fuse::residual ? 3 * es : fuse == Fuse::quant ? es + 1 : 2 * es);
    for (int i = 0; i < sets_for(set_bytes, cold_bytes); ++i) {
      x_.emplace_back(device, dt, std::initializer_list<int64_t>{rows, h});
      fill_random(x_.back().host(), 31 + uint64_t(i));
      x_.back().upload();
      if (fuse == Fuse::quant) {
        y_.emplace_back(device, DType::f8e4m3, std::initializer_list<int64_t>{rows, h});
        s_.emplace_back(device, DType::f32, std::initializer_list<int64_t>{rows, h / 128});
      } else {
        y_.emplace_back(device, dt, std::initializer_list<int64_t>{rows, h});
      }
      if (fuse == Fuse::residual) {
        r_.emplace_back(device, dt, std::initializer_list<int64_t>{rows, h});
        fill_random(r_.back().host(), 57 + uint64_t(i));
        r_.back().upload();
      }
    }
  }
  std::string shape() const override { return "tokens=" + std::to_string(rows_) + " hidden=" + std::to_string(h_); }
  std::string dtype() const override {
    std::string d(dtype_name(dt_));
    return fuse_ == Fuse::none ? d : fuse_ == Fuse::residual ? d + " +residual" : d + "->f8e4m3";
  }
  Device device() const override { return device_; }
  Cost cost() const override {
    double n = double(rows_) * double(h_), es = double(dtype_size(dt_));
    double bytes = fuse_ == Fuse::none ? 2 * n * es : fuse_ == Fuse::residual ? 4 * n * es : n * (es + 1) + n / 32;
    double read = (fuse_ == Fuse::residual ? 2 : 1) * n * es;  // x (and the residual)
    return {0, bytes + double(h_) * es, Unit::fma_f32, Unit::mem_copy, read + double(h_) * es};
  }
  int input_sets() const override { return int(x_.size()); }
  void run(int set) override {
    size_t i = size_t(set);
    if (fuse_ == Fuse::none) rmsnorm(x_[i], w_, y_[i]);
    else if (fuse_ == Fuse::residual) add_rmsnorm(x_[i], r_[i], w_, y_[i]);
    else rmsnorm_quant_fp8(x_[i], w_, y_[i], s_[i]);
  }
  CheckResult check() override {
    if (fuse_ == Fuse::quant) {
      return check_fused_quant(
          device_, rows_, h_, [&](const Tensor& act) { rmsnorm(x_[0], w_, act); },
          [&](const Tensor& act) {
            Buffer ref(DType::bf16, {rows_, h_});
            reference::rmsnorm(x_[0].host(), w_.host(), ref, 1e-6);
            return compare_relative(act, ref, tolerance(DType::bf16));
          },
          [&] {
            y_[0].upload(), s_[0].upload();
            run(0);
            y_[0].download(), s_[0].download();
          },
          y_[0].host(), s_[0].host());
    }
    Buffer ref(dt_, {rows_, h_});
    if (fuse_ == Fuse::residual) {
      // The reference takes the norm of the new residual as the op stores it.
      Buffer expect_res(dt_, {rows_, h_});
      for (int64_t i = 0; i < rows_ * h_; ++i)
        store_from_double(expect_res.data(), dt_, size_t(i),
                          double(float(load_as_double(r_[0].host().data(), dt_, size_t(i))) +
                                 float(load_as_double(x_[0].host().data(), dt_, size_t(i)))));
      poison(y_[0].host());
      y_[0].upload();
      run(0);
      y_[0].download(), r_[0].download();
      CheckResult rr = compare_bitwise(r_[0].host(), expect_res);
      if (!rr.pass) return {false, rr.error, 0, "residual: " + rr.detail};
      reference::rmsnorm(expect_res, w_.host(), ref, 1e-6);
    } else {
      reference::rmsnorm(x_[0].host(), w_.host(), ref, 1e-6);
      poison(y_[0].host());
      y_[0].upload();
      run(0);
      y_[0].download();
    }
    return compare_relative(y_[0].host(), ref, tolerance(dt_));
  }

 private:
  int64_t rows_, h_;
  DType dt_;
  Fuse fuse_;
  Device device_;
  CaseOperand w_;
  std::vector<CaseOperand> x_, y_, r_, s_;
};

}  // namespace

void register_norm_ops() {
  OpInfo op;
  op.name = "rmsnorm";
  op.rows_param = "tokens";
  op.summary = "RMSNorm over the last dim (fp32 statistics), optionally fused with a residual add or FP8 quant";
  op.params = {
      {"tokens", "rows", "4096", ParamSpec::size},
      {"hidden", "row length", "7168", ParamSpec::size},
      {"dtype", "f32 or bf16 (input and output)", "bf16", ParamSpec::dtype},
      {"fuse", "none | residual | quant", "none", ParamSpec::text},
      device_param(),
  };
  op.bench_table = {{}, {{"tokens", "16"}}, {{"fuse", "residual"}}, {{"fuse", "quant"}}};
  op.check_table = {{{"tokens", "1"}, {"hidden", "1"}},
                    {{"tokens", "7"}, {"hidden", "13"}, {"dtype", "f32"}},
                    {{"tokens", "33"}, {"hidden", "7168"}},
                    {{"tokens", "0"}, {"hidden", "64"}},
                    {{"tokens", "19"}, {"hidden", "1000"}, {"fuse", "residual"}},
                    {{"tokens", "5"}, {"hidden", "77"}, {"fuse", "residual"}, {"dtype", "f32"}},
                    {{"tokens", "37"}, {"hidden", "1536"}, {"fuse", "quant"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<RmsNormCase>(p.integer("tokens"), p.integer("hidden"), p.dtype("dtype"),
                                         parse_fuse(p.text("fuse")), p.device("device"), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
