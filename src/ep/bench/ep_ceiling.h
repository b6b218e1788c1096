#pragma once
// The ceiling of an expert-parallel dispatch: the same one-sided puts with no synchronisation.
#include <cstddef>
#include <cstdint>

#include "sol/comm.h"

namespace sol::comm {

// Bytes per second each rank of the node writes into the next local rank's shared segment when
// every rank does so at once, putting each of `rows` source rows (`row_bytes` each, from this
// rank's private memory) `fanout` times, row after row: the copies a dispatch makes when a
// token goes to `fanout` places (its source row is read once from memory and then from L1).
// The plain copy ceiling reads every byte it writes, so against it a dispatch with fanout > 1
// could pass 100%. Rates are per written byte; across emulated nodes the lowest node's.
double ep_put_ceiling(const Group& group, int64_t rows, int64_t row_bytes, int fanout, int iters, int batches);

}  // namespace sol::comm
