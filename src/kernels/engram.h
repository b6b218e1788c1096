#pragma once
// Engram's kernels at one ISA level, as a table (core/kernel_table.h): the n-gram hash of a
// row of token ids (kernels/engram_hash.h) and the addresses of looked-up rows
// (kernels/engram_rows.h).
#include "core/kernel_table.h"
#include "kernels/engram_hash.h"
#include "kernels/engram_rows.h"

namespace sol::kernels {

struct EngramKernels {
  decltype(&engram::detail::hash_row_scalar) hash_row;
  decltype(&engram::detail::row_sources_scalar) row_sources;
};
KernelTable<EngramKernels> engram_kernel_table();

}  // namespace sol::kernels
