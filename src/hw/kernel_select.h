#pragma once
// The kernel set a caller runs: its family's table entry for the CPU at the ISA level in force.
// This is the one place ops, comm and the parallel layers read active_isa() (which re-reads
// SOL_ISA): a caller picks its set once per call and passes it down, never per row.
#include "core/kernel_table.h"
#include "sol/error.h"
#include "sol/hw.h"

namespace sol {

// The KernelNeeds this CPU meets, less any a test has masked (mask_kernel_needs).
uint32_t kernel_needs_met();
// Tests only: hide features from the tables (a variant's general entry then runs), returning
// the previous mask.
uint32_t mask_kernel_needs(uint32_t masked);
// Tests only: add core traits (kKernelTraits; a CPU feature would fault), so a trait's variant
// runs on any CPU of its level; returns the previous forced traits. The mask still wins.
uint32_t force_kernel_traits(uint32_t traits);

template <class Set>
const Set& select_kernels(KernelTable<Set> table, const char* family) {
  const Isa level = active_isa();
  const KernelEntry<Set>* e = best_entry(table, Backend::cpu, level, kernel_needs_met());
  if (!e) fail(family, "no kernel set for backend cpu at ISA level ", isa_name(level));
  return *e->set;
}

}  // namespace sol
