#pragma once
// The floor of an op on this machine:
//   floor = max(flops / peak(compute unit), bytes / bandwidth(memory level),
//               read_bytes / bandwidth(mem_read), (bytes - read_bytes) / bandwidth(mem_write))
//   SOL%  = 100 * floor / measured time
// The read and write terms apply when a cost splits its bytes (read_bytes > 0). They matter for
// ops that read far more than they write (MoE unpermute, routing) or the reverse (MoE permute):
// a core copies DRAM faster than it reads or writes alone (a copy's non-temporal writes do not
// hold read-miss slots), so the copy ceiling alone would set a floor no schedule of their
// reads, or their writes, can reach.
#include <string_view>

#include "sol/hw.h"

namespace sol {

struct Cost {
  double flops = 0;               // useful work only (int8: OPs)
  double bytes = 0;               // each input read once, each output written once
  Unit compute = Unit::fma_f32;   // the unit that does the flops
  Unit memory = Unit::mem_copy;   // the level the bytes move through
  double read_bytes = 0;          // of `bytes`, those read from DRAM (the rest are written);
                                  // 0: not split (the read and write terms are left out)

  // Whether the read and write terms apply (a read-level cost has no copy term to split).
  bool split() const { return read_bytes > 0 && memory != Unit::mem_read; }
  double written_bytes() const { return split() ? bytes - read_bytes : 0; }
};

enum class Bound { compute, memory, link };
std::string_view bound_name(Bound b);

struct Floor {
  double compute_s = 0;  // flops / peak
  double memory_s = 0;   // the largest of the copy, read and write terms
  double floor_s = 0;    // the larger of the two
  Bound bound = Bound::memory;
  Unit memory_unit = Unit::mem_copy;  // the level that set memory_s
};

// peak in FLOP/s, bandwidths in B/s (read_bandwidth: mem_read, write_bandwidth: mem_write, used
// only when read_bytes > 0); a side with no work costs nothing. Throws sol::Error when the cost
// needs a ceiling that is zero (unit unavailable) or read_bytes is not a part of bytes.
Floor roofline_floor(const Cost& cost, double peak, double bandwidth, double read_bandwidth = 0,
                     double write_bandwidth = 0);
Floor roofline_floor(const Cost& cost, const MachineProfile& machine, int threads);

// The unit whose ceiling bounds work meant for `u` on this machine: `u` where the profile has
// it, else the unit the work falls back to. bf16 (and fp8, which runs on the bf16 units) dot
// products on a CPU without AVX512_BF16 are computed as fp32 FMAs on the widened values, so
// their floor is the fma_f32 peak; without it such an op would have no floor at all. int8 dot
// products without AVX512_VNNI (AVX2: widened to int16, summed by vpmaddwd) are held to the
// same peak until an int8 loop of their own is measured; vpmaddwd does twice an FMA's work per
// instruction, so that floor can read above 100% of it. Where the profile has both and its
// one-thread fma_f32 is the faster, bf16 work is held to fma_f32: the FMAs compute the same
// exact products (GEMM's FMA variant on Intel's AVX-512 cores runs there).
Unit compute_unit_on(Unit u, const MachineProfile& machine);

// The ceilings a cost needs, from a profile (zero where it needs none); `sol bench` replaces
// the one it re-measured beside the op before taking the floor.
struct FloorCeilings {
  double peak = 0, bandwidth = 0, read_bandwidth = 0, write_bandwidth = 0;
};
FloorCeilings floor_ceilings(const Cost& cost, const MachineProfile& machine, int threads);

inline double sol_percent(const Floor& f, double measured_s) {
  return measured_s > 0 ? 100.0 * f.floor_s / measured_s : 0.0;
}

}  // namespace sol
