// The optional CPU features the kernel tables may ask for (core/kernel_table.h), as this CPU
// has them, with a mask tests use to run a variant's general entry on a CPU that has both.
#include <atomic>

#include "hw/kernel_select.h"

namespace sol {

namespace {
std::atomic<uint32_t> g_masked{0};
}  // namespace

uint32_t kernel_needs_met() {
  const CpuFeatures& f = cpu_features();
  uint32_t have = kNeedsNothing;
  if (f.best_isa >= Isa::avx512 && f.avx512_vbmi) have |= kNeedsVbmi;
  return have & ~g_masked.load();
}

uint32_t mask_kernel_needs(uint32_t masked) { return g_masked.exchange(masked); }

}  // namespace sol
