#pragma once
// The one timing rule of every `sol comm bench` op (collectives, EP, CP, PP, Engram): `batches`
// rounds that all ranks start together, each `iters` calls long; a round counts as its slowest
// rank's mean call, and the median round is reported (nccl-tests reports one mean; on shared
// VMs a median resists neighbours' bursts).
#include <functional>

#include "sol/comm.h"

namespace sol::comm::detail {

double time_batches(const Group& g, const std::function<void()>& run, int iters, int batches);

}  // namespace sol::comm::detail
