// Registry entry for embedding: gather rows by token id, checked byte for byte.
#include <cstring>
#include <memory>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/embedding.h"
#include "sol/error.h"
#include "sol/registry.h"

namespace sol {

namespace {

class EmbeddingCase : public OpCase {
 public:
  EmbeddingCase(int64_t tokens, int64_t vocab, int64_t hidden, DType dt, int64_t cold_bytes)
      : tokens_(tokens), hidden_(hidden), dt_(dt), table_(dt, {vocab, hidden}) {
    sol::check(vocab >= 1, "embedding", "--vocab = ", vocab, " but must be >= 1");
    fill_random(table_, 2);
    // Each set looks up its own scattered ids (every row a separate DRAM stream), so rotating
    // sets also rotates the table rows that are read.
    for (int i = 0; i < sets_for(2 * tokens * hidden * int64_t(dtype_size(dt)), cold_bytes); ++i) {
      ids_.emplace_back(DType::i32, std::initializer_list<int64_t>{tokens});
      for (int64_t t = 0; t < tokens; ++t)
        ids_.back().tensor().data_as<int32_t>()[t] =
            int32_t((uint64_t(t + i * tokens) * 2654435761u) % uint64_t(vocab));
      out_.emplace_back(dt, std::initializer_list<int64_t>{tokens, hidden});
    }
  }
  std::string shape() const override {
    return "tokens=" + std::to_string(tokens_) + " vocab=" + std::to_string(table_.tensor().shape(0)) +
           " hidden=" + std::to_string(hidden_);
  }
  std::string dtype() const override { return std::string(dtype_name(dt_)); }
  Cost cost() const override {
    const double rows = double(tokens_) * double(hidden_) * double(dtype_size(dt_));
    return {0, 2 * rows, Unit::fma_f32, Unit::mem_copy, rows};
  }
  int input_sets() const override { return int(out_.size()); }
  void run(int set) override { embedding(table_, ids_[size_t(set)], out_[size_t(set)]); }
  CheckResult check() override {
    Buffer ref(dt_, {tokens_, hidden_});
    const size_t row = size_t(hidden_) * dtype_size(dt_);
    for (int64_t t = 0; t < tokens_; ++t)
      std::memcpy(static_cast<char*>(ref.data()) + size_t(t) * row,
                  static_cast<const char*>(table_.data()) + size_t(ids_[0].tensor().data_as<int32_t>()[t]) * row, row);
    poison(out_[0]);
    run(0);
    return compare_bitwise(out_[0], ref);
  }

 private:
  int64_t tokens_, hidden_;
  DType dt_;
  Buffer table_;
  std::vector<Buffer> ids_, out_;
};

}  // namespace

void register_embedding_ops() {
  OpInfo op;
  op.name = "embedding";
  op.summary = "embedding gather: out[t] = table[ids[t]] (bad ids are a clear error)";
  op.params = {
      {"tokens", "ids to look up", "4096", ParamSpec::size},
      {"vocab", "table rows", "16384", ParamSpec::size},
      {"hidden", "row length", "7168", ParamSpec::size},
      {"dtype", "element type", "bf16", ParamSpec::dtype},
  };
  op.bench_table = {{}, {{"tokens", "16"}}};
  op.check_table = {{{"tokens", "1"}, {"vocab", "1"}, {"hidden", "1"}},
                    {{"tokens", "37"}, {"vocab", "100"}, {"hidden", "129"}, {"dtype", "f32"}},
                    {{"tokens", "0"}, {"vocab", "10"}, {"hidden", "16"}},
                    {{"tokens", "300"}, {"vocab", "50"}, {"hidden", "7168"}},
                    // Past half the LLC: streaming stores, rows of 14000 B (off 64-byte lines).
                    {{"tokens", "1300"}, {"vocab", "64"}, {"hidden", "7000"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<EmbeddingCase>(p.integer("tokens"), p.integer("vocab"), p.integer("hidden"), p.dtype("dtype"),
                                           cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
