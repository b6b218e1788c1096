// Registry entry for engram-hash: the n-gram hash of one Engram layer (DeepSeek's configuration:
// 2- and 3-grams, 8 heads each, tables of 5 x 129280 rows per order), checked bit for bit
// against the one-token-at-a-time reference.
#include <cstring>
#include <memory>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/compare.h"
#include "sol/engram.h"
#include "sol/error.h"
#include "sol/registry.h"

namespace sol {

namespace {

class EngramHashCase : public OpCase {
 public:
  EngramHashCase(int64_t batch, int64_t tokens, int max_ngram, int heads, int64_t vocab, int64_t cold_bytes)
      : batch_(batch), tokens_(tokens) {
    const std::vector<int64_t> sizes(size_t(max_ngram - 1), 129280 * 5);
    const int layer = 1;
    config_ = engram::make_hash_configs(sizes, max_ngram, heads, {&layer, 1}, vocab, 0, 2).front();
    const int64_t bytes = batch * tokens * 4 * (1 + config_.heads());
    for (int s = 0; s < sets_for(bytes, cold_bytes); ++s) {
      ids_.emplace_back(DType::i32, std::initializer_list<int64_t>{batch, tokens});
      out_.emplace_back(DType::i32, std::initializer_list<int64_t>{batch, tokens, int64_t(config_.heads())});
      uint64_t x = 0x5EEDull + uint64_t(s);
      int32_t* p = ids_.back().tensor().data_as<int32_t>();
      for (int64_t i = 0; i < batch * tokens; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = int32_t((x >> 33) % uint64_t(vocab));
      }
    }
  }
  std::string shape() const override {
    return "batch=" + std::to_string(batch_) + " tokens=" + std::to_string(tokens_) + " ngram=" +
           std::to_string(config_.max_ngram) + " heads=" + std::to_string(config_.heads());
  }
  std::string dtype() const override { return "i32"; }
  Cost cost() const override {
    // Integer work has no FLOP ceiling here: the floor is reading the ids and writing the rows.
    return {0, double(batch_ * tokens_) * 4.0 * double(1 + config_.heads()), Unit::fma_f32, Unit::mem_copy};
  }
  int input_sets() const override { return int(ids_.size()); }
  void run(int set) override { engram::ngram_hash(ids_[size_t(set)], out_[size_t(set)], config_); }
  CheckResult check() override {
    Buffer ref(DType::i32, {batch_, tokens_, int64_t(config_.heads())});
    engram::ngram_hash_reference(ids_[0], ref, config_, true);
    std::memset(out_[0].data(), 0xFF, out_[0].bytes());
    run(0);
    return compare_bitwise(out_[0], ref);
  }

 private:
  int64_t batch_, tokens_;
  engram::HashConfig config_;
  std::vector<Buffer> ids_, out_;
};

}  // namespace

void register_engram_ops() {
  OpInfo op;
  op.name = "engram-hash";
  op.summary = "DeepSeek Engram n-gram hash: odd multipliers, XOR mix, one prime per head, table offsets";
  op.params = {
      {"batch", "sequences", "4", ParamSpec::integer},
      {"tokens", "tokens per sequence", "4096", ParamSpec::size},
      {"ngram", "max n-gram order N (orders 2..N)", "3", ParamSpec::integer},
      {"heads", "hash heads per order", "8", ParamSpec::integer},
      {"vocab", "compressed vocabulary (ids drawn below it)", "100000", ParamSpec::integer},
  };
  op.bench_table = {{}, {{"batch", "1"}, {"tokens", "64"}}};
  op.report_table = {{{"batch", "1"}}};
  op.check_table = {{{"batch", "3"}, {"tokens", "37"}},
                    {{"batch", "2"}, {"tokens", "1"}},
                    {{"batch", "1"}, {"tokens", "0"}},
                    {{"batch", "2"}, {"tokens", "19"}, {"ngram", "5"}, {"heads", "3"}, {"vocab", "2147483647"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    const int64_t ngram = p.integer("ngram"), heads = p.integer("heads");
    sol::check(ngram >= 2 && ngram <= 8, "engram-hash", "--ngram = ", ngram, " but must be in 2..8");
    sol::check(heads >= 1 && (ngram - 1) * heads <= 64, "engram-hash", "--heads = ", heads, " but (ngram-1) x heads must be in 1..64");
    return std::make_unique<EngramHashCase>(p.integer("batch"), p.integer("tokens"), int(ngram), int(heads),
                                            std::max<int64_t>(1, p.integer("vocab")), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
