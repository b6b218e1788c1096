#pragma once
// The floor of an op on this machine:
//   floor = max(flops / peak(compute unit), bytes / bandwidth(memory level))
//   SOL%  = 100 * floor / measured time
#include <string_view>

#include "sol/hw.h"

namespace sol {

struct Cost {
  double flops = 0;               // useful work only (int8: OPs)
  double bytes = 0;               // each input read once, each output written once
  Unit compute = Unit::fma_f32;   // the unit that does the flops
  Unit memory = Unit::mem_copy;   // the level the bytes move through
};

enum class Bound { compute, memory, link };
std::string_view bound_name(Bound b);

struct Floor {
  double compute_s = 0;  // flops / peak
  double memory_s = 0;   // bytes / bandwidth
  double floor_s = 0;    // the larger of the two
  Bound bound = Bound::memory;
};

// peak in FLOP/s, bandwidth in B/s; a side with no work costs nothing. Throws sol::Error when
// the cost needs a ceiling that is zero (unit unavailable).
Floor roofline_floor(const Cost& cost, double peak, double bandwidth);
Floor roofline_floor(const Cost& cost, const MachineProfile& machine, int threads);

inline double sol_percent(const Floor& f, double measured_s) {
  return measured_s > 0 ? 100.0 * f.floor_s / measured_s : 0.0;
}

}  // namespace sol
