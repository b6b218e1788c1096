#pragma once
// An op family's kernel table: entries (backend, ISA level, kernel set), defined next to the
// family's kernels (src/kernels/x86/<family>_table.cc); hw/kernel_select.h picks the entry of
// the level in force. A set holds the family's kernels for
// one level; kernels a level lacks are null, and the op takes its portable route there. The
// best set for a level is the entry of that backend with the highest level not above it, so a
// level without an entry of its own (avx2 for most families) runs the one below.
#include <span>

#include "sol/isa.h"

namespace sol {

template <class Set>
struct KernelEntry {
  Backend backend;
  Isa isa;
  const Set* set;
};

template <class Set>
using KernelTable = std::span<const KernelEntry<Set>>;

// The entry of `backend` with the highest level at most `level`; null when there is none.
template <class Set>
const KernelEntry<Set>* best_entry(KernelTable<Set> table, Backend backend, Isa level) {
  const KernelEntry<Set>* best = nullptr;
  for (const KernelEntry<Set>& e : table)
    if (e.backend == backend && e.isa <= level && (!best || e.isa > best->isa)) best = &e;
  return best;
}

}  // namespace sol
