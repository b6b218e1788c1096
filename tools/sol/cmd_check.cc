// sol check [OP] — every registered op's correctness cases on this machine's active path.
#include <fmt/format.h>

#include "cli.h"
#include "sol/error.h"
#include "sol/registry.h"

namespace sol::cli {

void add_check(CLI::App& app, int& exit_code) {
  auto op_name = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("check", "Run the correctness checks (all ops, or one)");
  cmd->add_option("op", *op_name, "Only this op");
  cmd->callback([op_name, &exit_code] {
    std::vector<const OpInfo*> ops;
    if (!op_name->empty()) ops.push_back(&find_op(*op_name));
    else for (const auto& o : registered_ops()) ops.push_back(&o);
    fmt::print("path: {}\n", isa_name(active_isa()));
    int passed = 0, failed = 0;
    for (const OpInfo* op : ops) {
      for (const auto& c : op->check_table) {
        OpParams params = resolve_params(*op, c);
        auto oc = op->make(params, 0);
        CheckResult r = oc->check();
        (r.pass ? passed : failed)++;
        fmt::print("{:<6} {:<8} {:<14} {:<16} error {:.3g} (tolerance {:.3g}){}{}\n",
                   r.pass ? "ok" : "FAIL", op->name, oc->shape(), oc->dtype(), r.error,
                   r.tolerance, r.detail.empty() ? "" : ": ", r.detail);
      }
    }
    fmt::print("{} passed, {} failed\n", passed, failed);
    exit_code = failed ? kCheckFailed : kOk;
  });
}

}  // namespace sol::cli
