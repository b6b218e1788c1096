#pragma once
// The keys of a kernel table (core: plain enums, no detection). hw decides which ISA level is
// in force (sol/hw.h: active_isa); each op family's table in kernels maps (backend, level) to
// a kernel set; ops pick one set per call (src/ops/common/kernel_select.h).
namespace sol {

enum class Isa { scalar = 0, avx2 = 1, avx512 = 2, amx = 3 };

// Where a kernel set runs. A device backend adds entries to the families' tables.
enum class Backend { cpu = 0, cuda = 1 };

}  // namespace sol
