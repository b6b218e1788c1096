// Registry entry for moe-routing, checked against a reference that selects by sorting (a
// different algorithm from the op's bounded insertion) on the same f32 scores.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/routing/scores.h"
#include "sol/error.h"
#include "sol/registry.h"
#include "sol/routing.h"

namespace sol {

namespace {

// Sort key of sol/routing.h: numbers before NaN, larger first, then lower index.
bool ranks_before(float a, int64_t ia, float b, int64_t ib) {
  if (std::isnan(a) != std::isnan(b)) return std::isnan(b);
  if (!std::isnan(a) && a != b) return a > b;
  return ia < ib;
}

void routing_reference(const Tensor& logits, const RoutingOptions& o, std::vector<int32_t>& idx,
                       std::vector<float>& w) {
  const int64_t tokens = logits.shape(0), e = logits.shape(1), per = e / o.n_group;
  const auto scores_of = routing_detail::score_function();
  std::vector<float> scores(static_cast<size_t>(e)), sel(static_cast<size_t>(e)), scratch(static_cast<size_t>(e));
  idx.assign(size_t(tokens * o.top_k), -1);
  w.assign(size_t(tokens * o.top_k), 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    scores_of(logits.data_as<const char>() + t * e * int64_t(dtype_size(logits.dtype())), logits.dtype(), e,
              o.scoring, scores.data(), scratch.data());
    for (int64_t i = 0; i < e; ++i)
      sel[size_t(i)] = scores[size_t(i)] + (o.correction_bias ? o.correction_bias->data_as<const float>()[i] : 0.0f);
    std::vector<int64_t> candidates;
    if (o.n_group > 1) {
      std::vector<std::pair<float, int64_t>> groups;
      for (int64_t g = 0; g < o.n_group; ++g) {
        std::vector<int64_t> members(static_cast<size_t>(per));
        std::iota(members.begin(), members.end(), g * per);
        std::sort(members.begin(), members.end(),
                  [&](int64_t a, int64_t b) { return ranks_before(sel[size_t(a)], a, sel[size_t(b)], b); });
        float gs = o.scoring == Scoring::sigmoid ? sel[size_t(members[0])] + sel[size_t(members[1])] : sel[size_t(members[0])];
        groups.push_back({gs, g});
      }
      std::sort(groups.begin(), groups.end(),
                [](auto& a, auto& b) { return ranks_before(a.first, a.second, b.first, b.second); });
      for (int64_t j = 0; j < o.topk_group; ++j)
        for (int64_t i = 0; i < per; ++i) candidates.push_back(groups[size_t(j)].second * per + i);
    } else {
      candidates.resize(static_cast<size_t>(e));
      std::iota(candidates.begin(), candidates.end(), 0);
    }
    std::sort(candidates.begin(), candidates.end(),
              [&](int64_t a, int64_t b) { return ranks_before(sel[size_t(a)], a, sel[size_t(b)], b); });
    float sum = 0;
    for (int64_t j = 0; j < o.top_k; ++j) sum += scores[size_t(candidates[size_t(j)])];
    for (int64_t j = 0; j < o.top_k; ++j) {
      idx[size_t(t * o.top_k + j)] = int32_t(candidates[size_t(j)]);
      w[size_t(t * o.top_k + j)] = scores[size_t(candidates[size_t(j)])] * (o.renormalize ? o.scaling / sum : o.scaling);
    }
  }
}

class RoutingCase : public OpCase {
 public:
  RoutingCase(int64_t tokens, int64_t experts, int64_t top_k, int64_t n_group, int64_t topk_group, Scoring s,
              Device device, int64_t cold_bytes)
      : tokens_(tokens), experts_(experts), device_(device), bias_(device, DType::f32, {experts}) {
    fill_random(bias_.host(), 3, 0.1);
    bias_.upload();
    opt_.top_k = top_k;
    opt_.n_group = n_group;
    opt_.topk_group = topk_group;
    opt_.scoring = s;
    opt_.scaling = s == Scoring::sigmoid ? 2.5f : 1.0f;
    opt_.correction_bias = s == Scoring::sigmoid ? &bias_.tensor() : nullptr;
    for (int i = 0; i < sets_for(tokens * experts * 4, cold_bytes); ++i) {
      logits_.emplace_back(device, DType::f32, std::initializer_list<int64_t>{tokens, experts});
      fill_random(logits_.back().host(), 17 + uint64_t(i), 4.0);
      logits_.back().upload();
      idx_.emplace_back(device, DType::i32, std::initializer_list<int64_t>{tokens, top_k});
      w_.emplace_back(device, DType::f32, std::initializer_list<int64_t>{tokens, top_k});
    }
  }
  std::string shape() const override {
    return "tokens=" + std::to_string(tokens_) + " experts=" + std::to_string(experts_) + " k=" +
           std::to_string(opt_.top_k) + (opt_.n_group > 1 ? " groups=" + std::to_string(opt_.topk_group) + "/" +
                                                                 std::to_string(opt_.n_group)
                                                           : "");
  }
  std::string dtype() const override { return opt_.scoring == Scoring::sigmoid ? "f32 sigmoid" : "f32 softmax"; }
  Device device() const override { return device_; }
  Cost cost() const override {
    double t = double(tokens_);
    return {0, t * double(experts_) * 4 + t * double(opt_.top_k) * 8, Unit::fma_f32, Unit::mem_copy,
            t * double(experts_) * 4};
  }
  int input_sets() const override { return int(logits_.size()); }
  void run(int set) override { moe_routing(logits_[size_t(set)], idx_[size_t(set)], w_[size_t(set)], opt_); }
  CheckResult check() override {
    float* l = logits_[0].host().tensor().data_as<float>();
    if (tokens_ > 2 && experts_ >= 4) {
      l[3] = NAN;                              // token 0: a NaN logit must not be chosen
      for (int64_t i = 0; i < experts_; ++i)   // token 1: all equal: ties go to lower indices
        l[experts_ + i] = 0.5f;
    }
    if (tokens_ > 4 && experts_ >= 4) {
      for (int64_t i = 0; i < experts_ / 2 + 1; ++i)  // token 2: the first half (and one) NaN
        l[2 * experts_ + i] = NAN;
      for (int64_t i = 0; i < experts_; ++i)  // token 3: five distinct values: ties across groups
        l[3 * experts_ + i] = std::round(l[3 * experts_ + i] / 2);
      for (int64_t i = 0; i < experts_; ++i)  // token 4: saturated scores, 0 or 1 exactly
        l[4 * experts_ + i] = i % 5 == 3 ? 100.0f : -100.0f;
    }
    logits_[0].upload();
    std::vector<int32_t> ridx;
    std::vector<float> rw;
    RoutingOptions host_opt = opt_;  // the reference reads the bias on the host
    if (opt_.correction_bias) host_opt.correction_bias = &bias_.host().tensor();
    routing_reference(logits_[0].host(), host_opt, ridx, rw);
    poison(idx_[0].host());
    poison(w_[0].host());
    idx_[0].upload();
    w_[0].upload();
    run(0);
    idx_[0].download();
    w_[0].download();
    Tensor ref_w(rw.data(), DType::f32, {tokens_, opt_.top_k});
    const int32_t* got = idx_[0].host().tensor().data_as<int32_t>();
    for (size_t i = 0; i < ridx.size(); ++i)
      if (got[i] != ridx[i])
        return {false, 1, 0, "topk_idx[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", expected " +
                                  std::to_string(ridx[i])};
    // A chosen NaN score makes its token's weights NaN (sol/routing.h: tokens 0 and 2 when k is
    // every eligible expert); which NaN is not promised, and a GPU's carries no payload.
    return compare_bitwise(w_[0].host(), ref_w, NanBits::any);
  }

 private:
  int64_t tokens_, experts_;
  Device device_;
  CaseOperand bias_;
  RoutingOptions opt_;
  std::vector<CaseOperand> logits_, idx_, w_;
};

Scoring parse_scoring(const std::string& s) {
  if (s == "sigmoid") return Scoring::sigmoid;
  if (s == "softmax") return Scoring::softmax;
  fail("moe-routing", "--scoring = '", s, "' but expected sigmoid or softmax");
}

}  // namespace

void register_routing_ops() {
  OpInfo op;
  op.name = "moe-routing";
  op.rows_param = "tokens";
  op.summary = "MoE top-k routing: DeepSeek-V3 sigmoid + bias + group-limited choice, or softmax top-k";
  op.params = {
      {"tokens", "rows of router logits", "4096", ParamSpec::size},
      {"experts", "routed experts", "256", ParamSpec::size},
      {"k", "experts per token", "8", ParamSpec::integer},
      {"n_group", "expert groups", "8", ParamSpec::integer},
      {"topk_group", "groups kept per token", "4", ParamSpec::integer},
      {"scoring", "sigmoid (with correction bias, scaling 2.5) | softmax", "sigmoid", ParamSpec::text},
      device_param(),
  };
  op.bench_table = {{}, {{"tokens", "16"}}, {{"scoring", "softmax"}, {"experts", "8"}, {"k", "2"}, {"n_group", "1"}, {"topk_group", "1"}}};
  op.check_table = {{},
                    {{"tokens", "1"}},
                    {{"tokens", "37"}, {"experts", "64"}, {"k", "6"}, {"n_group", "1"}, {"topk_group", "1"}, {"scoring", "softmax"}},
                    {{"tokens", "0"}},
                    {{"tokens", "13"}, {"experts", "10"}, {"k", "3"}, {"n_group", "5"}, {"topk_group", "2"}},
                    {{"tokens", "9"}, {"experts", "64"}, {"k", "20"}, {"n_group", "1"}, {"topk_group", "1"}, {"scoring", "softmax"}},
                    {{"tokens", "9"}, {"experts", "128"}, {"k", "8"}, {"n_group", "8"}, {"topk_group", "3"}},
                    {{"tokens", "9"}, {"experts", "37"}, {"k", "5"}, {"n_group", "1"}, {"topk_group", "1"}},
                    {{"tokens", "9"}, {"experts", "8"}, {"k", "2"}, {"n_group", "1"}, {"topk_group", "1"}, {"scoring", "softmax"}},
                    {{"tokens", "9"}, {"experts", "512"}, {"k", "8"}, {"n_group", "32"}, {"topk_group", "4"}},
                    {{"tokens", "9"}, {"experts", "256"}, {"k", "8"}, {"n_group", "8"}, {"topk_group", "4"}, {"scoring", "softmax"}},
                    // The fused sigmoid kernel's other instances: no groups, 2 and 4 groups, k = all
                    // eligible (16, ranked in registers), k > 16 (ranked in scalar code).
                    {{"tokens", "7"}, {"experts", "256"}, {"k", "8"}, {"n_group", "1"}, {"topk_group", "1"}},
                    {{"tokens", "11"}, {"experts", "64"}, {"k", "6"}, {"n_group", "4"}, {"topk_group", "2"}},
                    {{"tokens", "6"}, {"experts", "32"}, {"k", "16"}, {"n_group", "2"}, {"topk_group", "1"}},
                    {{"tokens", "6"}, {"experts", "48"}, {"k", "20"}, {"n_group", "1"}, {"topk_group", "1"}},
                    {{"tokens", "5"}, {"experts", "16"}, {"k", "16"}, {"n_group", "1"}, {"topk_group", "1"}},
                    // One token per lane (softmax, <= 16 experts): 1 token, a partial last step of
                    // 16 (33 = 2 x 16 + 1), k = experts, 16 experts with k 8, experts not a power of two.
                    {{"tokens", "1"}, {"experts", "8"}, {"k", "2"}, {"n_group", "1"}, {"topk_group", "1"}, {"scoring", "softmax"}},
                    {{"tokens", "33"}, {"experts", "8"}, {"k", "2"}, {"n_group", "1"}, {"topk_group", "1"}, {"scoring", "softmax"}},
                    {{"tokens", "21"}, {"experts", "5"}, {"k", "5"}, {"n_group", "1"}, {"topk_group", "1"}, {"scoring", "softmax"}},
                    {{"tokens", "40"}, {"experts", "16"}, {"k", "8"}, {"n_group", "1"}, {"topk_group", "1"}, {"scoring", "softmax"}},
                    {{"tokens", "17"}, {"experts", "13"}, {"k", "3"}, {"n_group", "1"}, {"topk_group", "1"}, {"scoring", "softmax"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<RoutingCase>(p.integer("tokens"), p.integer("experts"), p.integer("k"), p.integer("n_group"),
                                         p.integer("topk_group"), parse_scoring(p.text("scoring")),
                                         p.device("device"), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
