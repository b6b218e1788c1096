#pragma once
// An op family's kernel table: entries (backend, ISA level, kernel set), defined next to the
// family's kernels (src/kernels/x86/<family>_table.cc); hw/kernel_select.h picks the entry of
// the level in force. A set holds the family's kernels for
// one level; kernels a level lacks are null, and the op takes its portable route there. The
// best set for a level is the entry of that backend with the highest level not above it, so a
// level without an entry of its own (avx2 for most families) runs the one below.
#include <cstdint>
#include <span>

#include "sol/isa.h"

namespace sol {

// CPU features outside the ISA levels that an entry may need: a variant of a level for the
// cores that have them (the level's other entry serves the rest). A variant is listed before
// the level's general entry; among entries of one level the first whose needs are met wins.
// A trait is not a feature but what the core is good at: any CPU of the level can run its
// variant, so tests force traits on every machine (force_kernel_traits).
enum KernelNeeds : uint32_t {
  kNeedsNothing = 0,
  kNeedsVbmi = 1u << 0,  // AVX512-VBMI (byte permutes): Zen 4 on, Ice Lake on; not Cooper Lake
  // Trait: the core's two FMA pipes outrun its bf16 dot product (CoreShape::bf16_by_fma), so
  // bf16 products run as f32 FMAs on the widened values.
  kPrefersFmaBf16 = 1u << 1,
};
inline constexpr uint32_t kKernelTraits = kPrefersFmaBf16;

template <class Set>
struct KernelEntry {
  Backend backend;
  Isa isa;
  const Set* set;
  uint32_t needs = kNeedsNothing;
};

template <class Set>
using KernelTable = std::span<const KernelEntry<Set>>;

// The entry of `backend` with the highest level at most `level` whose needs are all in `have`
// (and, given `wanted`, whose set it accepts); null when there is none.
template <class Set, class Wanted>
const KernelEntry<Set>* best_entry(KernelTable<Set> table, Backend backend, Isa level, uint32_t have, Wanted&& wanted) {
  const KernelEntry<Set>* best = nullptr;
  for (const KernelEntry<Set>& e : table)
    if (e.backend == backend && e.isa <= level && (e.needs & ~have) == 0 && (!best || e.isa > best->isa) &&
        wanted(*e.set))
      best = &e;
  return best;
}
template <class Set>
const KernelEntry<Set>* best_entry(KernelTable<Set> table, Backend backend, Isa level, uint32_t have = kNeedsNothing) {
  return best_entry(table, backend, level, have, [](const Set&) { return true; });
}

}  // namespace sol
