#pragma once
// The GEMM tests' paths: every ISA path this CPU has (isa_paths.h), plus the AMX kernels on the
// scalar tile model where the CPU has AVX-512 but no AMX (this project's CI machines), so the
// AMX kernels, their K tails and their driver run every GEMM case even without the hardware.
// On a machine with AMX the amx ISA pass already runs the real tiles.
#include <gtest/gtest.h>

#include <cstdlib>

#include "hw/kernel_select.h"
#include "ops/gemm/problem.h"
#include "ops/isa_paths.h"
#include "sol/hw.h"

namespace sol::testing_paths {

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

// Every ISA path; at the avx512 level both bf16 routes (vdpbf16ps and f32 FMAs); and the AMX
// kernels on their model where the CPU has AVX-512 but no AMX.
template <class Body>
void for_each_gemm_path(Body&& body) {
  for_each_isa(body);
  const CpuFeatures& f = cpu_features();
  if (f.best_isa >= Isa::avx512) {
    OtherBf16Route other;
    SCOPED_TRACE(other.fma() ? "SOL_ISA=avx512, bf16 by f32 FMAs (forced)" : "SOL_ISA=avx512, bf16 by vdpbf16ps (FMA masked)");
    body();
  }
  if (f.best_isa >= Isa::amx || f.best_isa < Isa::avx512) return;
  struct Restore {
    ~Restore() { gemm_detail::force_amx_model(false); }
  } restore;
  gemm_detail::force_amx_model(true);
  SCOPED_TRACE("AMX kernels on the tile model");
  body();
}

}  // namespace sol::testing_paths
