#pragma once
#include <string>
#include <vector>

#include "sol/bench.h"

namespace sol::cli {
// Two log-log panels: the classic roofline (FLOP/s against FLOP per byte, each compute ceiling
// a flat roof, each memory ceiling a slope) with every op that does arithmetic as a labelled
// point; and, for pure data movement (zero FLOPs, which a roofline cannot place), achieved GB/s
// against bytes moved with the memory ceilings as horizontal lines.
std::string roofline_svg(const MachineProfile& machine, const std::vector<BenchRecord>& records);
}  // namespace sol::cli
