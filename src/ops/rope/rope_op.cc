// Registry entry for rope: DeepSeek-V3's YaRN RoPE on the 64 rope dims of MLA heads, checked
// against a double-precision rotation.
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
#include "sol/rope.h"

namespace sol {

namespace {

void rope_reference(const Tensor& x, const Tensor& y, const int32_t* pos, const RopeConfig& c, int64_t offset) {
  const std::vector<double> f = rope_inv_freq(c);
  const double m = rope_attention_factor(c);
  const int64_t tokens = x.shape(0), heads = x.shape(1), hd = x.shape(2), half = c.rope_dim / 2;
  for (int64_t i = 0; i < x.numel(); ++i) store_from_double(y.data(), y.dtype(), size_t(i), load_as_double(x.data(), x.dtype(), size_t(i)));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        int64_t base = (t * heads + h) * hd + offset;
        int64_t ia = base + (c.layout == RopeLayout::interleaved ? 2 * i : i);
        int64_t ib = base + (c.layout == RopeLayout::interleaved ? 2 * i + 1 : i + half);
        double a = load_as_double(x.data(), x.dtype(), size_t(ia)), b = load_as_double(x.data(), x.dtype(), size_t(ib));
        double ang = double(pos[t]) * f[size_t(i)], cs = std::cos(ang) * m, sn = std::sin(ang) * m;
        store_from_double(y.data(), y.dtype(), size_t(ia), a * cs - b * sn);
        store_from_double(y.data(), y.dtype(), size_t(ib), a * sn + b * cs);
      }
}

class RopeCase : public OpCase {
 public:
  RopeCase(int64_t tokens, int64_t heads, int64_t head_dim, int64_t offset, DType dt, RopeConfig c, Device device,
           int64_t cold_bytes)
      : tokens_(tokens), heads_(heads), hd_(head_dim), offset_(offset), dt_(dt), config_(c), device_(device),
        table_(c, 163840), pos_(device, DType::i32, {tokens}) {
    sol::check(dt == DType::f32 || dt == DType::bf16, "rope", "--dtype = ", dtype_name(dt), " but must be f32 or bf16");
    for (int64_t t = 0; t < tokens; ++t) pos_.host().tensor().data_as<int32_t>()[t] = int32_t((t * 7919) % 163840);
    pos_.upload();
    for (int i = 0; i < sets_for(2 * tokens * heads * head_dim * int64_t(dtype_size(dt)), cold_bytes); ++i) {
      x_.emplace_back(device, dt, std::initializer_list<int64_t>{tokens, heads, head_dim});
      fill_random(x_.back().host(), 5 + uint64_t(i));
      x_.back().upload();
    }
  }
  std::string shape() const override {
    return "tokens=" + std::to_string(tokens_) + " heads=" + std::to_string(heads_) + " dims=" +
           std::to_string(offset_) + "+" + std::to_string(config_.rope_dim) + "/" + std::to_string(hd_);
  }
  std::string dtype() const override {
    return std::string(dtype_name(dt_)) + (config_.layout == RopeLayout::interleaved ? " interleaved" : " half");
  }
  Device device() const override { return device_; }
  Cost cost() const override {
    // In place: only the rope slice of each head is read and written back, at the in-place
    // update ceiling (a copy's streamed stores are not how these bytes move).
    double n = double(tokens_) * double(heads_) * double(config_.rope_dim);
    return {0, 2 * n * double(dtype_size(dt_)), Unit::fma_f32, Unit::mem_update, n * double(dtype_size(dt_))};
  }
  int input_sets() const override { return int(x_.size()); }
  void run(int set) override { rope(x_[size_t(set)], pos_, table_, offset_); }
  CheckResult check() override {
    Buffer ref(dt_, {tokens_, heads_, hd_});
    x_[0].download();  // in place: earlier runs rotated it
    rope_reference(x_[0].host(), ref, pos_.host().tensor().data_as<int32_t>(), config_, offset_);
    run(0);
    x_[0].download();
    return compare_relative(x_[0].host(), ref, dt_ == DType::bf16 ? 8e-3 : 2e-5);
  }

 private:
  int64_t tokens_, heads_, hd_, offset_;
  DType dt_;
  RopeConfig config_;
  Device device_;
  RopeTable table_;
  CaseOperand pos_;
  std::vector<CaseOperand> x_;
};

}  // namespace

void register_rope_ops() {
  OpInfo op;
  op.name = "rope";
  op.rows_param = "tokens";
  op.summary = "rotary embedding in place on each head's rope slice; YaRN as DeepSeek-V3 configures it";
  op.params = {
      {"tokens", "rows", "4096", ParamSpec::size},
      {"heads", "heads per token", "128", ParamSpec::integer},
      {"head_dim", "elements per head", "192", ParamSpec::integer},
      {"offset", "first rope dim within the head (MLA: 128 nope dims first)", "128", ParamSpec::integer},
      {"rope_dim", "rotated dims", "64", ParamSpec::integer},
      {"layout", "interleaved | half", "interleaved", ParamSpec::text},
      {"yarn", "1: DeepSeek-V3 YaRN (factor 40); 0: plain RoPE", "1", ParamSpec::integer},
      {"dtype", "f32 or bf16", "bf16", ParamSpec::dtype},
      device_param(),
  };
  op.bench_table = {{}, {{"tokens", "16"}}};
  op.check_table = {{{"tokens", "33"}},
                    {{"tokens", "5"}, {"layout", "half"}, {"dtype", "f32"}},
                    {{"tokens", "7"}, {"heads", "3"}, {"head_dim", "10"}, {"offset", "0"}, {"rope_dim", "10"}, {"yarn", "0"}, {"dtype", "f32"}},
                    {{"tokens", "7"}, {"heads", "2"}, {"head_dim", "38"}, {"offset", "2"}, {"rope_dim", "36"}, {"layout", "half"}},
                    // bf16 interleaved: whole lines (96 = 3 x 32) and a width that is not (40)
                    {{"tokens", "9"}, {"heads", "3"}, {"head_dim", "101"}, {"offset", "5"}, {"rope_dim", "96"}},
                    {{"tokens", "9"}, {"heads", "3"}, {"head_dim", "40"}, {"offset", "0"}, {"rope_dim", "40"}},
                    {{"tokens", "0"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    RopeConfig c = p.integer("yarn") ? deepseek_v3_rope() : RopeConfig{};
    c.rope_dim = p.integer("rope_dim");
    const std::string& layout = p.text("layout");
    sol::check(layout == "interleaved" || layout == "half", "rope", "--layout = '", layout, "' but expected interleaved or half");
    c.layout = layout == "half" ? RopeLayout::half : RopeLayout::interleaved;
    return std::make_unique<RopeCase>(p.integer("tokens"), p.integer("heads"), p.integer("head_dim"), p.integer("offset"),
                                      p.dtype("dtype"), c, p.device("device"), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
