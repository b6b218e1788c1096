// Registry entry for copy: cost, cases, check against a byte-for-byte reference.
#include <cstring>
#include <memory>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/copy.h"
#include "sol/registry.h"

namespace sol {

namespace {

class CopyCase : public OpCase {
 public:
  CopyCase(int64_t n, DType dtype, int64_t offset, Device device, int64_t cold_bytes)
      : n_(n), offset_(offset), dtype_(dtype), device_(device) {
    int64_t set_bytes = 2 * n * int64_t(dtype_size(dtype));
    for (int i = 0; i < sets_for(set_bytes, cold_bytes); ++i) {
      src_.emplace_back(device, dtype, std::initializer_list<int64_t>{n + offset});
      dst_.emplace_back(device, dtype, std::initializer_list<int64_t>{n + offset});
      fill_random(src_.back().host(), 1234 + uint64_t(i));
      poison(dst_.back().host());
      src_.back().upload();
      dst_.back().upload();
    }
  }
  std::string shape() const override { return "n=" + std::to_string(n_); }
  std::string dtype() const override { return std::string(dtype_name(dtype_)); }
  Device device() const override { return device_; }
  Cost cost() const override {
    double bytes = 2.0 * double(n_) * double(dtype_size(dtype_));
    return {0, bytes, Unit::fma_f32, Unit::mem_copy, bytes / 2};
  }
  int input_sets() const override { return int(src_.size()); }
  void run(int set) override { copy(view(src_[size_t(set)]), view(dst_[size_t(set)])); }
  CheckResult check() override {
    poison(dst_[0].host());
    dst_[0].upload();
    run(0);
    dst_[0].download();
    Buffer ref(dtype_, {n_});
    std::memcpy(ref.data(), view(src_[0].host()).data(), size_t(n_) * dtype_size(dtype_));
    return compare_bitwise(view(dst_[0].host()), ref);
  }

 private:
  // Views start `offset` elements in, so checks can exercise unaligned pointers.
  Tensor view(const Tensor& b) const { return b.slice(0, offset_, offset_ + n_); }
  int64_t n_, offset_;
  DType dtype_;
  Device device_;
  std::vector<CaseOperand> src_, dst_;
};

}  // namespace

void register_copy_ops() {
  OpInfo op;
  op.name = "copy";
  op.rows_param = "n";
  op.summary = "dst = src, contiguous, any dtype (memory-bound: read n + write n elements)";
  op.params = {
      {"n", "elements", "64M", ParamSpec::size},
      {"dtype", "element type", "f32", ParamSpec::dtype},
      {"offset", "start the views this many elements into their buffers (misalignment)", "0",
       ParamSpec::integer},
      device_param(),
  };
  op.bench_table = {{{"n", "16M"}}, {{"n", "64M"}}};
  op.check_table = {{{"n", "0"}}, {{"n", "1"}},        {{"n", "7"}, {"offset", "1"}},
                    {{"n", "1000003"}, {"offset", "3"}}, {{"n", "4M"}, {"dtype", "bf16"}},
                    {{"n", "12345"}, {"dtype", "f8e4m3"}, {"offset", "1"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    int64_t n = p.integer("n"), offset = p.integer("offset");
    return std::make_unique<CopyCase>(n, p.dtype("dtype"), offset, p.device("device"), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
