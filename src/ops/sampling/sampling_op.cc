// Registry entry for sampling, checked against a reference that sorts every candidate (the op
// selects the top_k first) and draws with the same uniform.
#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/fill.h"
#include "sol/error.h"
#include "sol/registry.h"
#include "sol/sampling.h"

namespace sol {

namespace {

int32_t reference_row(const float* l, int64_t v, const SamplingOptions& o, int64_t r) {
  std::vector<int32_t> order(static_cast<size_t>(v));
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int32_t i) { return std::isnan(l[i]) ? -INFINITY : double(l[i]); };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key(a) > key(b); });
  if (o.temperature == 0.0f) return order[0];
  const double mx = key(order[0]);
  std::vector<double> p;
  for (int32_t i : order)
    if (key(i) > -INFINITY) p.push_back(std::exp((key(i) - mx) / double(o.temperature)));
  size_t keep = o.top_k > 0 ? std::min(p.size(), size_t(o.top_k)) : p.size();
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[i];
  if (o.top_p < 1.0f) {
    double run = 0;
    size_t n = 0;
    while (n < keep && run < double(o.top_p) * total) run += p[n++];
    keep = std::max<size_t>(n, 1);
    total = 0;
    for (size_t i = 0; i < keep; ++i) total += p[i];
  }
  double target = sampling_uniform(o.seed, r) * total, run = 0;
  for (size_t i = 0; i < keep; ++i)
    if ((run += p[i]) > target) return order[i];
  return order[keep - 1];
}

class SamplingCase : public OpCase {
 public:
  // Input sets rotate past the LLC (cold_bytes), as the floor is DRAM bandwidth.
  SamplingCase(int64_t batch, int64_t vocab, const SamplingOptions& o, int64_t cold_bytes)
      : batch_(batch), vocab_(vocab), opt_(o), ids_(DType::i32, {batch}) {
    for (int i = 0; i < sets_for(batch * vocab * 4, cold_bytes); ++i) {
      logits_.emplace_back(DType::f32, std::initializer_list<int64_t>{batch, vocab});
      fill_random(logits_.back(), 7 + uint64_t(i), 8.0);
    }
  }
  std::string shape() const override {
    return "batch=" + std::to_string(batch_) + " vocab=" + std::to_string(vocab_) + " k=" + std::to_string(opt_.top_k) +
           " p=" + std::to_string(opt_.top_p).substr(0, 4) + " T=" + std::to_string(opt_.temperature).substr(0, 4);
  }
  std::string dtype() const override { return "f32"; }
  Cost cost() const override {
    return {0, double(batch_) * double(vocab_) * 4 + double(batch_) * 4, Unit::fma_f32, Unit::mem_read};
  }
  int input_sets() const override { return int(logits_.size()); }
  void run(int set) override { sample(logits_[size_t(set)], ids_, opt_); }
  CheckResult check() override {
    if (batch_ > 0 && vocab_ > 3) logits_[0].tensor().data_as<float>()[1] = NAN;
    poison(ids_);
    run(0);
    for (int64_t r = 0; r < batch_; ++r) {
      int32_t want = reference_row(logits_[0].tensor().data_as<float>() + r * vocab_, vocab_, opt_, r);
      int32_t got = ids_.tensor().data_as<int32_t>()[r];
      if (got != want)
        return {false, 1, 0, "row " + std::to_string(r) + ": sampled " + std::to_string(got) + ", expected " + std::to_string(want)};
    }
    return {true, 0, 0, ""};
  }

 private:
  int64_t batch_, vocab_;
  SamplingOptions opt_;
  std::vector<Buffer> logits_;
  Buffer ids_;
};

}  // namespace

void register_sampling_ops() {
  OpInfo op;
  op.name = "sampling";
  op.rows_param = "batch";
  op.summary = "top-k / top-p sampling from logits with temperature and a seeded, per-row generator";
  op.params = {
      {"batch", "rows of logits", "64", ParamSpec::size},
      {"vocab", "ids per row", "129280", ParamSpec::size},
      {"top_k", "keep the k most likely ids (0: all)", "50", ParamSpec::integer},
      {"top_p", "keep the shortest prefix reaching this probability", "0.9", ParamSpec::text},
      {"temperature", "0: greedy", "0.7", ParamSpec::text},
      {"seed", "generator seed", "1", ParamSpec::integer},
  };
  op.bench_table = {{{"batch", "16"}}};
  op.check_table = {{{"batch", "9"}, {"vocab", "1000"}},
                    {{"batch", "5"}, {"vocab", "777"}, {"top_k", "0"}, {"top_p", "1"}, {"temperature", "1"}},
                    {{"batch", "4"}, {"vocab", "300"}, {"temperature", "0"}},
                    {{"batch", "3"}, {"vocab", "1"}, {"top_k", "1"}},
                    {{"batch", "0"}, {"vocab", "10"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    SamplingOptions o;
    o.top_k = p.integer("top_k");
    try {
      o.top_p = std::stof(p.text("top_p"));
      o.temperature = std::stof(p.text("temperature"));
    } catch (const std::exception&) {
      fail("sampling", "--top_p and --temperature must be numbers, got '", p.text("top_p"), "' and '",
           p.text("temperature"), "'");
    }
    o.seed = uint64_t(p.integer("seed"));
    return std::make_unique<SamplingCase>(p.integer("batch"), p.integer("vocab"), o, cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
