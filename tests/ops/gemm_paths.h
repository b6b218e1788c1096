#pragma once
// The GEMM tests' paths: every ISA path this CPU has (isa_paths.h), plus the AMX kernels on the
// scalar tile model where the CPU has AVX-512 but no AMX (this project's CI machines), so the
// AMX kernels, their K tails and their driver run every GEMM case even without the hardware.
// On a machine with AMX the amx ISA pass already runs the real tiles.
#include <gtest/gtest.h>

#include "ops/gemm/problem.h"
#include "ops/isa_paths.h"
#include "sol/hw.h"

namespace sol::testing_paths {

// Every ISA path with both bf16 routes at avx512 (isa_paths.h), and the AMX kernels on their
// model where the CPU has AVX-512 but no AMX.
template <class Body>
void for_each_gemm_path(Body&& body) {
  for_each_bf16_path(body);
  const CpuFeatures& f = cpu_features();
  if (f.best_isa >= Isa::amx || f.best_isa < Isa::avx512) return;
  struct Restore {
    ~Restore() { gemm_detail::force_amx_model(false); }
  } restore;
  gemm_detail::force_amx_model(true);
  SCOPED_TRACE("AMX kernels on the tile model");
  body();
}

}  // namespace sol::testing_paths
