#pragma once
// Collectives among the ranks of one node, through the shared segments.
//
// Every algorithm is a sequence of steps (GroupState::post_and_wait). Data either sits in the
// ranks' heap buffers and peers read it in place (zero copy, then one closing step so nobody
// returns while a peer still reads its buffer), or is copied through the two staging slots
// in chunks. Heap or not must agree across ranks (checked).
#include <cstdint>
#include <functional>

#include "comm/group_state.h"
#include "sol/comm.h"
#include "sol/dtype.h"

namespace sol::comm::detail {

// Called between the reduce and gather phases of an allreduce with this rank's reduced part
// (in place), so a hierarchical allreduce can combine the part across nodes.
using PartHook = std::function<void(void* part, int64_t elements)>;

void local_barrier(GroupState& s, std::string_view op);
void local_allreduce(GroupState& s, const void* in, void* out, int64_t count, DType t, ReduceOp op,
                     const PartHook& across = {});
// in: s.size blocks of `count` elements; out: `count` elements.
void local_reduce_scatter(GroupState& s, const void* in, void* out, int64_t count, DType t,
                          ReduceOp op);
// out: s.size blocks of `bytes`.
void local_all_gather(GroupState& s, const void* in, void* out, size_t bytes);
// Byte counts per local rank; blocks packed in rank order. `op` names the public call.
void local_all_to_all_v(GroupState& s, StepOp op, const void* in, const uint64_t* send_bytes,
                        void* out, const uint64_t* recv_bytes);
void local_broadcast(GroupState& s, void* buffer, size_t bytes, int root);

}  // namespace sol::comm::detail
