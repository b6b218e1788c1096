// Registry entry for cast: cost, cases, check against the scalar conversions element by element.
#include <memory>
#include <string>

#include "kernels/convert.h"
#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/copy.h"
#include "sol/error.h"
#include "sol/registry.h"

namespace sol {

namespace {

class CastCase : public OpCase {
 public:
  CastCase(int64_t n, DType from, DType to, Device device, int64_t cold_bytes)
      : n_(n), from_(from), to_(to), device_(device) {
    sol::check(kernels::convert_supported(from, to), "cast", "cannot convert ", dtype_name(from), " to ",
          dtype_name(to));
    int64_t set_bytes = n * int64_t(dtype_size(from) + dtype_size(to));
    for (int i = 0; i < sets_for(set_bytes, cold_bytes); ++i) {
      src_.emplace_back(device, from, std::initializer_list<int64_t>{n});
      dst_.emplace_back(device, to, std::initializer_list<int64_t>{n});
      fill_random(src_.back().host(), 77 + uint64_t(i), 300.0);  // spans e4m3's saturation point
      poison(dst_.back().host());
      src_.back().upload();
      dst_.back().upload();
    }
  }
  std::string shape() const override { return "n=" + std::to_string(n_); }
  std::string dtype() const override {
    return std::string(dtype_name(from_)) + "->" + std::string(dtype_name(to_));
  }
  Device device() const override { return device_; }
  Cost cost() const override {
    double bytes = double(n_) * double(dtype_size(from_) + dtype_size(to_));
    return {0, bytes, Unit::fma_f32, Unit::mem_copy, double(n_) * double(dtype_size(from_))};
  }
  int input_sets() const override { return int(src_.size()); }
  void run(int set) override { cast(src_[size_t(set)], dst_[size_t(set)]); }
  CheckResult check() override {
    fill_random_with_specials(src_[0].host(), 99);
    poison(dst_[0].host());
    src_[0].upload();
    dst_[0].upload();
    run(0);
    dst_[0].download();
    Buffer ref(to_, {n_});
    kernels::convert_scalar(src_[0].host().data(), from_, ref.data(), to_, n_);
    return compare_bitwise(dst_[0].host(), ref);
  }

 private:
  int64_t n_;
  DType from_, to_;
  Device device_;
  std::vector<CaseOperand> src_, dst_;
};

}  // namespace

void register_cast_ops() {
  OpInfo op;
  op.name = "cast";
  op.rows_param = "n";
  op.summary = "dst = convert(src) between f32, bf16, f16, f8e4m3, f8e5m2 (round to nearest even)";
  op.params = {
      {"n", "elements", "64M", ParamSpec::size},
      {"from", "source dtype", "f32", ParamSpec::dtype},
      {"to", "destination dtype", "bf16", ParamSpec::dtype},
      device_param(),
  };
  op.bench_table = {{{"from", "f32"}, {"to", "bf16"}},    {{"from", "bf16"}, {"to", "f32"}},
                    {{"from", "f32"}, {"to", "f8e4m3"}},  {{"from", "f8e4m3"}, {"to", "bf16"}},
                    {{"from", "f16"}, {"to", "f32"}}};
  for (DType from : {DType::f32, DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2})
    for (DType to : {DType::f32, DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2})
      op.check_table.push_back({{"n", from == to ? "1" : "100003"},
                                {"from", std::string(dtype_name(from))},
                                {"to", std::string(dtype_name(to))}});
  op.check_table.push_back({{"n", "0"}});
  op.check_table.push_back({{"n", "17"}, {"from", "bf16"}, {"to", "f8e5m2"}});
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<CastCase>(p.integer("n"), p.dtype("from"), p.dtype("to"), p.device("device"),
                                      cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
