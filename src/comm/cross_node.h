#pragma once
// The cross-node halves of the hierarchical collectives (MPI between ranks with the same
// local index), and flat MPI fallbacks for groups whose nodes hold unequal rank counts.
#include <cstdint>

#include "comm/group_state.h"
#include "sol/comm.h"

namespace sol::comm::detail {

// data = op over the ranks of every node that have local index `local_index` (in node
// order, so all of them get identical bits).
void cross_allreduce(GroupState& s, int local_index, void* data, int64_t count, DType t, ReduceOp op);
void hierarchical_allreduce(GroupState& s, const void* in, void* out, int64_t count, DType t, ReduceOp op);
void hierarchical_reduce_scatter(GroupState& s, const void* in, void* out, int64_t count, DType t,
                                 ReduceOp op);
void hierarchical_all_gather(GroupState& s, const void* in, void* out, size_t bytes);
void hierarchical_all_to_all_v(GroupState& s, StepOp op, const void* in, const uint64_t* send_bytes,
                               void* out, const uint64_t* recv_bytes);
void hierarchical_broadcast(GroupState& s, void* buffer, size_t bytes, int root);
void hierarchical_barrier(GroupState& s);

}  // namespace sol::comm::detail
