// Names and display scales of the measured ceilings.
#include <string>

#include "sol/error.h"
#include "sol/hw.h"

namespace sol {

std::string_view unit_name(Unit u) {
  switch (u) {
    case Unit::fma_f32: return "fma_f32";
    case Unit::dot_bf16: return "dot_bf16";
    case Unit::dot_s8: return "dot_s8";
    case Unit::amx_bf16: return "amx_bf16";
    case Unit::amx_int8: return "amx_int8";
    case Unit::mem_read: return "mem_read";
    case Unit::mem_copy: return "mem_copy";
    case Unit::mem_triad: return "mem_triad";
    case Unit::mem_write: return "mem_write";
    case Unit::mem_update: return "mem_update";
    case Unit::l2_read: return "l2_read";
    case Unit::clock: return "clock";
    case Unit::mma_fp8: return "mma_fp8";
  }
  return "unknown";
}

std::string_view unit_label(Unit u) {
  if (unit_is_memory(u)) return "GB/s";
  if (u == Unit::clock) return "GHz";
  if (u == Unit::amx_int8 || u == Unit::dot_s8) return "GOP/s";
  return "GFLOP/s";
}

// Every label above is a giga-prefix of the raw per-second unit.
double unit_display_scale(Unit) { return 1e9; }

bool unit_is_memory(Unit u) {
  return u == Unit::mem_read || u == Unit::mem_copy || u == Unit::mem_triad ||
         u == Unit::mem_write || u == Unit::mem_update || u == Unit::l2_read;
}

bool unit_is_device_only(Unit u) { return u == Unit::mma_fp8; }

Ceiling device_only_ceiling(Unit u) {
  check(unit_is_device_only(u), "device_only_ceiling", unit_name(u), " is measured on the CPU");
  Ceiling c;
  c.unit = u;
  c.note = "a GPU tensor-core unit: no CPU has one (fp8 GEMM on the CPU is widened to bf16: dot_bf16 or amx_bf16)";
  return c;
}

Unit parse_unit(std::string_view name) {
  for (Unit u : kAllUnits)
    if (unit_name(u) == name) return u;
  std::string accepted;
  for (Unit u : kAllUnits) accepted += (accepted.empty() ? "" : ", ") + std::string(unit_name(u));
  fail("parse_unit", "unknown unit '", name, "': expected one of ", accepted);
}

}  // namespace sol
