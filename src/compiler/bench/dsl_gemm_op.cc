// Registry entry `dsl-gemm`: the DSL GEMM (dsl_gemm.cc), JIT-compiled once per process, with
// the cost of `gemm` for the same shape so SOL% compares side by side with
// `sol bench gemm --dtype bf16 --out f32` on that shape.
#include <cmath>
#include <cstring>
#include <sstream>

#include "compiler/bench/dsl_gemm.h"
#include "ops/builtin_ops.h"
#include "ops/common/buffer_sets.h"
#include "ops/common/compare.h"
#include "ops/common/fill.h"
#include "ops/gemm/reference.h"
#include "sol/registry.h"

namespace sol {

namespace {

class DslGemmCase : public OpCase {
 public:
  DslGemmCase(int64_t m, int64_t n, int64_t k, int64_t cold_bytes) : m_(m), n_(n), k_(k) {
    kernel_ = tile::compile(tile::dsl_gemm_bf16());
    for (int i = 0; i < sets_for(int64_t(cost().bytes), cold_bytes); ++i) {
      a_.emplace_back(DType::bf16, std::initializer_list<int64_t>{m, k});
      b_.emplace_back(DType::bf16, std::initializer_list<int64_t>{k, n});
      c_.emplace_back(DType::f32, std::initializer_list<int64_t>{m, n});
      fill_random(a_.back(), 1000 * uint64_t(i) + 1, 1.0);
      fill_random(b_.back(), 1000 * uint64_t(i) + 2, 1.0);
      poison(c_.back());
    }
  }
  std::string shape() const override {
    std::ostringstream os;
    os << "m=" << m_ << ",n=" << n_ << ",k=" << k_ << ",nn";
    return os.str();
  }
  std::string dtype() const override { return "bf16->f32"; }
  Cost cost() const override {
    const double m = double(m_), n = double(n_), k = double(k_);
    Cost c;
    c.flops = 2 * m * n * k;
    c.bytes = 2 * m * k + 2 * k * n + 4 * m * n;
    c.compute = Unit::dot_bf16;
    c.memory = Unit::mem_read;
    return c;
  }
  int input_sets() const override { return int(a_.size()); }
  void run(int set) override { (*kernel_)({a_[size_t(set)], b_[size_t(set)], c_[size_t(set)]}); }
  CheckResult check() override {
    poison(c_[0]);
    run(0);
    const int64_t rows = std::min<int64_t>(m_, 8);
    Buffer ref(DType::f32, {rows, n_}), got(DType::f32, {rows, n_});
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t r = rows == 1 ? 0 : i * (m_ - 1) / (rows - 1);
      reference_gemm(a_[0].tensor().slice(0, r, r + 1), b_[0], Layout::nn, nullptr, 1.0f, 0.0f, nullptr,
                     Activation::none, ref.tensor().slice(0, i, i + 1), nullptr, nullptr);
      std::memcpy(got.tensor().ptr({i, 0}), c_[0].tensor().ptr({r, 0}), size_t(n_) * 4);
    }
    return compare_relative(got, ref, 1e-2);
  }

 private:
  int64_t m_, n_, k_;
  std::shared_ptr<const tile::Kernel> kernel_;
  std::vector<Buffer> a_, b_, c_;
};

}  // namespace

void register_dsl_flash_attention_ops();  // dsl_flash_attention_op.cc
void register_tile_program_op();          // tile_program_op.cc

// Registers every DSL op (the GEMM here, flash attention and any program file beside it), so
// builtin_ops.h needs one line for all of them.
void register_dsl_gemm_ops() {
  register_dsl_flash_attention_ops();
  register_tile_program_op();
  OpInfo op;
  op.name = "dsl-gemm";
  op.summary = "bf16 GEMM written in the tile DSL (examples/tile/gemm_bf16.tile), JIT-compiled; compare with "
               "gemm --dtype bf16 --out f32";
  op.params = {{"m", "rows of A and C", "2048", ParamSpec::size},
               {"n", "columns of C", "2048", ParamSpec::size},
               {"k", "columns of A", "2048", ParamSpec::size}};
  op.bench_table = {{{"m", "1024"}, {"n", "1024"}, {"k", "1024"}}, {{"m", "2048"}, {"n", "2048"}, {"k", "2048"}}};
  op.report_table = {{{"m", "2048"}, {"n", "2048"}, {"k", "2048"}}};
  op.check_table = {{{"m", "1"}, {"n", "1"}, {"k", "1"}}, {{"m", "67"}, {"n", "291"}, {"k", "601"}},
                    {{"m", "200"}, {"n", "64"}, {"k", "1030"}}};
  op.make = [](const OpParams& p, int64_t cold_bytes) -> std::unique_ptr<OpCase> {
    return std::make_unique<DslGemmCase>(p.integer("m"), p.integer("n"), p.integer("k"), cold_bytes);
  };
  register_op(std::move(op));
}

}  // namespace sol
