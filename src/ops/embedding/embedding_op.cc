// Registry entry for embedding: gather rows by token id, checked byte for byte.
#include <cstring>
#include <memory>
#include <string>

#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/case_operand.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "sol/embedding.h"
#include "sol/error.h"
#include "sol/registry.h"

namespace sol {

namespace {

class EmbeddingCase : public OpCase {
 public:
  EmbeddingCase(int64_t tokens, int64_t vocab, int64_t hidden, DType dt, Device device, int64_t cold_bytes)
      : tokens_(tokens), hidden_(hidden), dt_(dt), device_(device), table_(device, dt, {vocab, hidden}) {
    sol::check(vocab >= 1, "embedding", "--vocab = ", vocab, " but must be >= 1");
    fill_random(table_.host(), 2);
    table_.upload();
    // Each set looks up its own scattered ids (every row a separate DRAM stream), so rotating
    // sets also rotates the table rows that are read.
    for (int i = 0; i < sets_for(2 * tokens * hidden * int64_t(dtype_size(dt)), cold_bytes); ++i) {
      ids_.emplace_back(device, DType::i32, std::initializer_list<int64_t>{tokens});
      for (int64_t t = 0; t < tokens; ++t)
        ids_.back().host().tensor().data_as<int32_t>()[t] =
            int32_t((uint64_t(t + i * tokens) * 2654435761u) % uint64_t(vocab));
      ids_.back().upload();
      out_.emplace_back(device, dt, std::initializer_list<int64_t>{tokens, hidden});
    }
  }
  std::string shape() const override {
    return "tokens=" + std::to_string(tokens_) + " vocab=" + std::to_string(table_.host().tensor().shape(0)) +
           " hidden=" + std::to_string(hidden_);
  }
  std::string dtype() const override { return std::string(dtype_name(dt_)); }
  Device device() const override { return device_; }
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
                  static_cast<const char*>(table_.host().data()) +
                      size_t(ids_[0].host().tensor().data_as<int32_t>()[t]) * row,
                  row);
    poison(out_[0].host());
    out_[0].upload();
    run(0);
    out_[0].download();
    return compare_bitwise(out_[0].host(), ref);
  }

 private:
  int64_t tokens_, hidden_;
  DType dt_;
  Device device_;
  CaseOperand table_;
  std::vector<CaseOperand> ids_, out_;
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
      device_param(),
  };
  op.bench_table = {{}, {{"tokens", "16"}}};
  op.check_table = {{{"tokens", "1"}, {"vocab", "1"}, {"hidden", "1"}},
                    {{"tokens", "37"}, {"vocab", "100"}, {"hidden", "129"}, {"dtype", "f32"}},
                    {{"tokens", "0"}, {"vocab", "10"}, {"hidden", "16"}},
                    {{"tokens", "300"}, {"vocab", "50"}, {"hidden", "7168"}},
                    // Past stream_min_bytes: streaming stores, rows of 14000 B (off 64-byte lines).
                    {{"tokens", "1300"}, {"vocab", "64"}, {"hidden", "7000"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<EmbeddingCase>(p.integer("tokens"), p.integer("vocab"), p.integer("hidden"), p.dtype("dtype"),
                                           p.device("device"), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
