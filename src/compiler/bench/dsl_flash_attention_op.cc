// Registry entry `dsl-flash-attention`: the DSL flash attention (dsl_flash_attention.cc),
// JIT-compiled once per process, with the cost `attention` charges for the same shape (head dim
// 128, bf16, no mask), so SOL% compares side by side with
// `sol bench attention --sq S --hq H` on that shape. Checked against sol::flash_attention.
#include <cmath>
#include <sstream>

#include "compiler/bench/dsl_flash_attention.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/attention.h"
#include "sol/registry.h"

namespace sol {

namespace {

constexpr int64_t kHeadDim = 128;

// [B, S, H, D] storage seen as the program's [B, H, S, D].
Tensor heads_major(const Buffer& b) {
  const Tensor t = b.tensor();
  const int64_t shape[4] = {t.shape()[0], t.shape()[2], t.shape()[1], t.shape()[3]};
  const int64_t stride[4] = {t.stride(0), t.stride(2), t.stride(1), t.stride(3)};
  return Tensor(t.data(), t.dtype(), shape, stride);
}

class DslFlashAttentionCase : public OpCase {
 public:
  DslFlashAttentionCase(int64_t batch, int64_t sq, int64_t skv, int64_t heads, int64_t cold_bytes)
      : b_(batch), sq_(sq), skv_(skv), h_(heads) {
    kernel_ = tile::compile(tile::dsl_flash_attention_bf16());
    for (int i = 0; i < sets_for(int64_t(cost().bytes), cold_bytes); ++i) {
      Set s{Buffer(DType::bf16, {b_, sq_, h_, kHeadDim}), Buffer(DType::bf16, {b_, skv_, h_, kHeadDim}),
            Buffer(DType::bf16, {b_, skv_, h_, kHeadDim}), Buffer(DType::bf16, {b_, sq_, h_, kHeadDim}),
            Buffer(DType::f32, {b_, h_, sq_})};
      fill_random(s.q, 1000 * uint64_t(i) + 1, 1.5);
      fill_random(s.k, 1000 * uint64_t(i) + 2, 1.5);
      fill_random(s.v, 1000 * uint64_t(i) + 3, 1.0);
      poison(s.o);
      poison(s.lse);
      sets_.push_back(std::move(s));
    }
  }
  std::string shape() const override {
    std::ostringstream os;
    os << "batch=" << b_ << ",sq=" << sq_ << ",skv=" << skv_ << ",h=" << h_ << ",d=" << kHeadDim;
    return os.str();
  }
  std::string dtype() const override { return "bf16"; }
  Cost cost() const override {  // as `attention` counts it without a mask
    const double b = double(b_), h = double(h_), sq = double(sq_), skv = double(skv_), d = double(kHeadDim);
    Cost c;
    c.flops = 2.0 * b * sq * skv * h * (d + d);
    c.bytes = 2.0 * (b * sq * h * d * 2 + b * skv * h * d * 2) + 4.0 * b * h * sq;
    c.compute = Unit::dot_bf16;
    c.memory = Unit::mem_read;
    return c;
  }
  int input_sets() const override { return int(sets_.size()); }
  void run(int i) override {
    Set& s = sets_[size_t(i)];
    const Tensor args[] = {heads_major(s.q), heads_major(s.k), heads_major(s.v), heads_major(s.o), s.lse.tensor()};
    (*kernel_)(args);
  }
  CheckResult check() override {
    Set& s = sets_[0];
    poison(s.o);
    poison(s.lse);
    run(0);
    Buffer o(DType::bf16, {b_, sq_, h_, kHeadDim}), lse(DType::f32, {b_, h_, sq_});
    flash_attention(s.q, s.k, s.v, o, lse);
    CheckResult r = compare_relative(s.o, o, 1e-2);
    if (!r.pass) return r;
    return compare_relative(s.lse, lse, 2e-4);
  }

 private:
  struct Set {
    Buffer q, k, v, o, lse;
  };
  int64_t b_, sq_, skv_, h_;
  std::shared_ptr<const tile::Kernel> kernel_;
  std::vector<Set> sets_;
};

}  // namespace

void register_dsl_flash_attention_ops() {
  using Case = std::map<std::string, std::string>;
  OpInfo op;
  op.name = "dsl-flash-attention";
  op.summary = "flash attention forward written in the tile DSL (examples/tile/flash_attention.tile), head dim 128, "
               "bf16, no mask, JIT-compiled; compare with attention --sq S --hq H";
  op.params = {{"batch", "sequences", "1", ParamSpec::size},
               {"sq", "query tokens per sequence", "2048", ParamSpec::size},
               {"skv", "key tokens per sequence (0: = sq)", "0", ParamSpec::size},
               {"hq", "heads", "16", ParamSpec::size}};
  op.bench_table = {Case{{"sq", "512"}, {"hq", "16"}}, Case{{"sq", "2048"}, {"hq", "16"}}};
  op.report_table = {Case{{"sq", "512"}, {"hq", "16"}}};
  op.check_table = {Case{{"sq", "1"}, {"hq", "1"}}, Case{{"sq", "100"}, {"skv", "150"}, {"hq", "2"}},
                    Case{{"batch", "2"}, {"sq", "130"}, {"hq", "3"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    const int64_t sq = p.integer("sq"), skv = p.integer("skv");
    return std::make_unique<DslFlashAttentionCase>(p.integer("batch"), sq, skv == 0 ? sq : skv, p.integer("hq"),
                                                   cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
