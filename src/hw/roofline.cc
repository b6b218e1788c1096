#include "sol/roofline.h"

#include "sol/error.h"

namespace sol {

std::string_view bound_name(Bound b) {
  switch (b) {
    case Bound::compute: return "compute";
    case Bound::memory: return "memory";
    case Bound::link: return "link";
  }
  return "?";
}

Floor roofline_floor(const Cost& cost, double peak, double bandwidth, double read_bandwidth,
                     double write_bandwidth) {
  check(cost.flops >= 0 && cost.bytes >= 0, "roofline", "negative cost: flops = ", cost.flops,
        ", bytes = ", cost.bytes);
  check(cost.read_bytes >= 0 && cost.read_bytes <= cost.bytes, "roofline", "read_bytes = ", cost.read_bytes,
        " is not a part of bytes = ", cost.bytes);
  const bool split = cost.split();
  check(!split || read_bandwidth > 0, "roofline", "op reads from ", unit_name(Unit::mem_read),
        " but its ceiling is ", read_bandwidth);
  const double written = cost.written_bytes();
  check(written == 0 || write_bandwidth > 0, "roofline", "op writes to ", unit_name(Unit::mem_write),
        " but its ceiling is ", write_bandwidth);
  check(cost.flops == 0 || peak > 0, "roofline", "op needs unit ", unit_name(cost.compute),
        " but its ceiling is ", peak, " (unavailable on this machine?)");
  check(cost.bytes == 0 || bandwidth > 0, "roofline", "op needs level ", unit_name(cost.memory),
        " but its ceiling is ", bandwidth);
  Floor f;
  f.compute_s = cost.flops > 0 ? cost.flops / peak : 0;
  f.memory_s = cost.bytes > 0 ? cost.bytes / bandwidth : 0;
  f.memory_unit = cost.memory;
  if (split && cost.read_bytes / read_bandwidth > f.memory_s) {
    f.memory_s = cost.read_bytes / read_bandwidth;
    f.memory_unit = Unit::mem_read;
  }
  if (written > 0 && written / write_bandwidth > f.memory_s) {
    f.memory_s = written / write_bandwidth;
    f.memory_unit = Unit::mem_write;
  }
  f.floor_s = f.compute_s > f.memory_s ? f.compute_s : f.memory_s;
  f.bound = f.compute_s > f.memory_s ? Bound::compute : Bound::memory;
  return f;
}

Unit compute_unit_on(Unit u, const MachineProfile& machine) {
  if ((u == Unit::dot_bf16 || u == Unit::dot_s8) && !machine.get(u).available) return Unit::fma_f32;
  if (u == Unit::dot_bf16) {
    // A bf16 product is exact in f32, so FMAs on the widened values do bf16 work too; where
    // they are the faster unit (Intel's AVX-512 cores) they are its floor.
    const Ceiling& fma = machine.get(Unit::fma_f32);
    if (fma.available && fma.one_thread > machine.get(u).one_thread) return Unit::fma_f32;
  }
  return u;
}

FloorCeilings floor_ceilings(const Cost& cost, const MachineProfile& machine, int threads) {
  FloorCeilings c;
  if (cost.flops > 0) c.peak = machine.value(compute_unit_on(cost.compute, machine), threads);
  if (cost.bytes > 0) c.bandwidth = machine.value(cost.memory, threads);
  if (cost.split()) c.read_bandwidth = machine.value(Unit::mem_read, threads);
  if (cost.written_bytes() > 0) c.write_bandwidth = machine.value(Unit::mem_write, threads);
  return c;
}

Floor roofline_floor(const Cost& cost, const MachineProfile& machine, int threads) {
  const FloorCeilings c = floor_ceilings(cost, machine, threads);
  return roofline_floor(cost, c.peak, c.bandwidth, c.read_bandwidth, c.write_bandwidth);
}

}  // namespace sol
