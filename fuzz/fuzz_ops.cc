// Stand-in ops for the CLI harness: one parameter of each kind, read the way an op's factory
// reads its flags (OpParams's typed getters), so that every parse of a typed value is reached.
#include <memory>

#include "sol/registry.h"

namespace sol {

namespace {
class NoCase final : public OpCase {
 public:
  std::string shape() const override { return ""; }
  std::string dtype() const override { return ""; }
  Cost cost() const override { return {}; }
  void run(int) override {}
  CheckResult check() override { return {true, 0, 0, ""}; }
};

OpInfo typed_op(const char* name) {
  OpInfo op;
  op.name = name;
  op.summary = "fuzz stand-in";
  op.params = {{"m", "rows", "64", ParamSpec::integer},
               {"n", "bytes", "4K", ParamSpec::size},
               {"dtype", "element type", "bf16", ParamSpec::dtype},
               {"layout", "nn or nt", "nn", ParamSpec::text}};
  op.make = [](const OpParams& p, int64_t) -> std::unique_ptr<OpCase> {
    p.integer("m");
    p.integer("n");
    p.dtype("dtype");
    p.text("layout");
    return std::make_unique<NoCase>();
  };
  return op;
}
}  // namespace

void register_fuzz_ops() {
  register_op(typed_op("gemm"));
  register_op(typed_op("copy"));
}

}  // namespace sol
