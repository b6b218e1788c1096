#pragma once
// Test helpers shared by the op tests: run a body on every ISA path this CPU has (by forcing
// SOL_ISA), and run an op's registered check cases on every path.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "sol/hw.h"
#include "sol/registry.h"

namespace sol::testing_paths {

// Paths: scalar, avx2, avx512 (amx when the CPU has it) — each at most the CPU's best.
template <class Body>
void for_each_isa(Body&& body) {
  for (Isa isa : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::amx}) {
    if (isa > cpu_features().best_isa) continue;
    setenv("SOL_ISA", std::string(isa_name(isa)).c_str(), 1);
    SCOPED_TRACE(std::string("SOL_ISA=") + std::string(isa_name(isa)));
    body();
  }
  unsetenv("SOL_ISA");
}

inline void expect_registry_checks_pass(const std::string& op_name) {
  const OpInfo& op = find_op(op_name);
  for_each_isa([&] {
    for (const auto& c : op.check_table) {
      auto oc = op.make(resolve_params(op, c), 0);
      CheckResult r = oc->check();
      EXPECT_TRUE(r.pass) << op.name << " " << oc->shape() << " " << oc->dtype() << ": " << r.detail;
    }
  });
}

}  // namespace sol::testing_paths
