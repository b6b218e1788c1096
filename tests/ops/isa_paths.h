#pragma once
// Test helpers shared by the op tests: run a body on every ISA path this CPU has (by forcing
// SOL_ISA), and run an op's registered check cases on every path.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "hw/kernel_select.h"
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

// For its scope: the avx512 level with the other bf16 route than this core's own — the FMA
// variant forced where the core takes vdpbf16ps, masked where it takes FMAs (kPrefersFmaBf16).
class OtherBf16Route {
 public:
  OtherBf16Route() : natural_((kernel_needs_met() & kPrefersFmaBf16) != 0) {
    setenv("SOL_ISA", "avx512", 1);
    if (natural_) {
      mask_before_ = mask_kernel_needs(0);
      mask_kernel_needs(mask_before_ | kPrefersFmaBf16);
    } else {
      forced_before_ = force_kernel_traits(kPrefersFmaBf16);
    }
  }
  ~OtherBf16Route() {
    if (natural_) mask_kernel_needs(mask_before_);
    else force_kernel_traits(forced_before_);
    unsetenv("SOL_ISA");
  }
  bool fma() const { return !natural_; }  // whether this scope runs the FMA variant
  OtherBf16Route(const OtherBf16Route&) = delete;
  OtherBf16Route& operator=(const OtherBf16Route&) = delete;

 private:
  bool natural_;
  uint32_t mask_before_ = 0, forced_before_ = 0;
};

// Every ISA path, and the avx512 level once more with the other bf16 route: the families with
// a kPrefersFmaBf16 variant (GEMM, flash attention) then run both on every AVX-512 machine.
template <class Body>
void for_each_bf16_path(Body&& body) {
  for_each_isa(body);
  if (cpu_features().best_isa < Isa::avx512) return;
  OtherBf16Route other;
  SCOPED_TRACE(other.fma() ? "SOL_ISA=avx512, bf16 by f32 FMAs (forced)" : "SOL_ISA=avx512, bf16 by vdpbf16ps (FMA masked)");
  body();
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
