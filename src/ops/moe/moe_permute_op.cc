// Registry entry for moe-permute (routing -> DeepGEMM contiguous layout) and its inverse.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/error.h"
#include "sol/moe_permute.h"
#include "sol/registry.h"

namespace sol {

namespace {

class MoePermuteCase : public OpCase {
 public:
  MoePermuteCase(int64_t tokens, int64_t hidden, int64_t experts, int64_t k, int64_t alignment, bool inverse,
                 Device device)
      : tokens_(tokens), hidden_(hidden), experts_(experts), k_(k), alignment_(alignment), inverse_(inverse),
        device_(device), x_(device, DType::bf16, {tokens, hidden}), idx_(device, DType::i32, {tokens, k}),
        w_(device, DType::f32, {tokens, k}), row_of_(device, DType::i32, {tokens, k}) {
    sol::check(k >= 1 && k <= experts, "moe-permute", "--k = ", k, " but must be in [1, experts = ", experts, "]");
    fill_random(x_.host(), 1);
    fill_random(w_.host(), 2, 1.0);
    // Distinct experts per token, spread unevenly (some experts get none when experts > tokens * k).
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t j = 0; j < k; ++j)
        idx_.host().tensor().data_as<int32_t>()[t * k + j] = int32_t((t * 7 + j * (experts / k + 1)) % experts);
    for (const CaseOperand* o : {&x_, &idx_, &w_}) o->upload();
    rows_ = moe_permuted_rows(idx_.host(), experts, alignment);
    perm_.emplace(device, DType::bf16, std::initializer_list<int64_t>{rows_, hidden});
    layout_.emplace(device, DType::i32, std::initializer_list<int64_t>{rows_});
    out_.emplace(device, DType::bf16, std::initializer_list<int64_t>{tokens, hidden});
    moe_permute(x_, idx_, experts_, alignment_, *perm_, *layout_, row_of_);
  }
  std::string shape() const override {
    return "tokens=" + std::to_string(tokens_) + " hidden=" + std::to_string(hidden_) + " experts=" +
           std::to_string(experts_) + " k=" + std::to_string(k_) + " rows=" + std::to_string(rows_);
  }
  std::string dtype() const override { return inverse_ ? "bf16 unpermute" : "bf16 permute"; }
  Device device() const override { return device_; }
  Cost cost() const override {
    double row = double(hidden_) * 2, routed = double(tokens_) * double(k_);
    // Each input read once, each output written once (roofline.h). permute: each token's row
    // read once (it goes to k rows, but reading it k times is the kernel's choice, and on two
    // threads a part of those re-reads hits the LLC: counted as k reads, the op printed 115%
    // SOL), every row of x_perm written; unpermute: each routed row read once, each token's
    // output written once.
    double read = inverse_ ? routed * row : double(tokens_) * row;
    double bytes = read + (inverse_ ? double(tokens_) : double(rows_)) * row;
    return {0, bytes, Unit::fma_f32, Unit::mem_copy, read};
  }
  void run(int) override {
    if (inverse_) moe_unpermute(*perm_, row_of_, w_, *out_);
    else moe_permute(x_, idx_, experts_, alignment_, *perm_, *layout_, row_of_);
  }
  CheckResult check() override {
    for (const CaseOperand* o : {&*perm_, &*layout_, &row_of_}) {
      poison(o->host());
      o->upload();
    }
    moe_permute(x_, idx_, experts_, alignment_, *perm_, *layout_, row_of_);
    for (const CaseOperand* o : {&*perm_, &*layout_, &row_of_}) o->download();
    // Every routed (t, j) lands in a row of its expert holding x[t], rows ascend by expert, and
    // padding is -1 and zero; then unpermute with weights equals the weighted sum by definition.
    const int32_t* e = idx_.host().tensor().data_as<int32_t>();
    const int32_t* ro = row_of_.host().tensor().data_as<int32_t>();
    const int32_t* gl = layout_->host().tensor().data_as<int32_t>();
    const size_t row = size_t(hidden_) * 2;
    std::vector<int> used(static_cast<size_t>(rows_), 0);
    for (int64_t i = 0; i < tokens_ * k_; ++i) {
      int32_t r = ro[i];
      if (r < 0 || r >= rows_ || gl[r] != e[i] || used[size_t(r)]++ ||
          std::memcmp(static_cast<char*>(perm_->host().data()) + size_t(r) * row,
                      static_cast<char*>(x_.host().data()) + size_t(i / k_) * row, row))
        return {false, 1, 0, "routed entry " + std::to_string(i) + " is not in a correct row"};
    }
    for (int64_t r = 0; r < rows_; ++r) {
      if (r > 0 && gl[r] >= 0 && gl[r - 1] > gl[r]) return {false, 1, 0, "rows not grouped by ascending expert"};
      if (!used[size_t(r)] && gl[r] != -1) return {false, 1, 0, "padding row " + std::to_string(r) + " not -1"};
    }
    if (!inverse_) return {true, 0, 0, ""};
    Buffer ref(DType::bf16, {tokens_, hidden_});
    for (int64_t t = 0; t < tokens_; ++t)
      for (int64_t c = 0; c < hidden_; ++c) {
        double s = 0;
        for (int64_t j = 0; j < k_; ++j)
          s += double(w_.host().tensor().data_as<float>()[t * k_ + j]) *
               double(bf16_to_f32(perm_->host().tensor().data_as<uint16_t>()[ro[t * k_ + j] * hidden_ + c]));
        store_from_double(ref.data(), DType::bf16, size_t(t * hidden_ + c), s);
      }
    poison(out_->host());
    out_->upload();
    moe_unpermute(*perm_, row_of_, w_, *out_);
    out_->download();
    return compare_relative(out_->host(), ref, 8e-3);
  }

 private:
  int64_t tokens_, hidden_, experts_, k_, alignment_;
  bool inverse_;
  Device device_;
  CaseOperand x_, idx_, w_, row_of_;
  std::optional<CaseOperand> perm_, layout_, out_;  // sized by the routing, made once it is known
  int64_t rows_ = 0;
};

}  // namespace

void register_moe_permute_ops() {
  OpInfo op;
  op.name = "moe-permute";
  op.rows_param = "tokens";
  op.summary = "routing -> DeepGEMM contiguous grouped layout (rows by expert, padded, -1 on padding) and back";
  op.params = {
      {"tokens", "tokens routed", "4096", ParamSpec::size},
      {"hidden", "row length", "7168", ParamSpec::size},
      {"experts", "experts (local to this rank)", "256", ParamSpec::integer},
      {"k", "experts per token", "8", ParamSpec::integer},
      {"alignment", "rows per expert rounded up to this (DeepGEMM: 128)", "128", ParamSpec::integer},
      {"inverse", "1: unpermute (weighted combine back to tokens)", "0", ParamSpec::integer},
      device_param(),
  };
  op.bench_table = {{}, {{"inverse", "1"}}};
  op.check_table = {{{"tokens", "1"}, {"hidden", "8"}, {"experts", "4"}, {"k", "2"}},
                    {{"tokens", "37"}, {"hidden", "129"}, {"experts", "16"}, {"k", "3"}, {"alignment", "8"}},
                    {{"tokens", "33"}, {"hidden", "64"}, {"experts", "256"}, {"k", "8"}, {"inverse", "1"}},
                    {{"tokens", "37"}, {"hidden", "129"}, {"experts", "16"}, {"k", "3"}, {"alignment", "8"}, {"inverse", "1"}},
                    {{"tokens", "0"}, {"hidden", "8"}, {"experts", "4"}, {"k", "2"}},
                    // Past stream_min_bytes: streaming stores, rows of 7000 B (off 64-byte lines).
                    {{"tokens", "300"}, {"hidden", "3500"}, {"experts", "16"}, {"k", "8"}}};
  op.make = [](const OpParams& p, int64_t) -> std::unique_ptr<OpCase> {
    int64_t inv = p.integer("inverse");
    sol::check(inv == 0 || inv == 1, "moe-permute", "--inverse = ", inv, " but must be 0 or 1");
    return std::make_unique<MoePermuteCase>(p.integer("tokens"), p.integer("hidden"), p.integer("experts"),
                                            p.integer("k"), p.integer("alignment"), inv == 1, p.device("device"));
  };
  register_op(std::move(op));
}

}  // namespace sol
