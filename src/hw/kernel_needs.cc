// The optional CPU features and core traits the kernel tables may ask for
// (core/kernel_table.h), as this CPU has them, with a mask tests use to run a variant's general
// entry on a CPU that has both, and forced traits to run a trait's variant anywhere.
#include <atomic>

#include "hw/kernel_select.h"
#include "sol/tuning.h"

namespace sol {

namespace {
std::atomic<uint32_t> g_masked{0};
std::atomic<uint32_t> g_forced{0};
}  // namespace

uint32_t kernel_needs_met() {
  const CpuFeatures& f = cpu_features();
  uint32_t have = kNeedsNothing;
  if (f.best_isa >= Isa::avx512 && f.avx512_vbmi) have |= kNeedsVbmi;
  if (f.best_isa >= Isa::avx512 && core_shape().bf16_by_fma) have |= kPrefersFmaBf16;
  return (have | g_forced.load()) & ~g_masked.load();
}

uint32_t mask_kernel_needs(uint32_t masked) { return g_masked.exchange(masked); }

uint32_t force_kernel_traits(uint32_t traits) {
  check(traits == (traits & kKernelTraits), "kernel traits", "only traits can be forced, not CPU features (",
        traits & ~kKernelTraits, ")");
  return g_forced.exchange(traits);
}

}  // namespace sol
