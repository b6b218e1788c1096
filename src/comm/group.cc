// Group: accessors, split, and the symmetric heap's allocator.
#include <memory>
#include <string>

#include "comm/group_state.h"
#include "comm/mpi_deadline.h"
#include "sol/comm.h"

namespace sol::comm {

using detail::GroupState;
using detail::StepOp;

Group::Group(std::shared_ptr<GroupState> state) : state_(std::move(state)) {}

int Group::rank() const { return state_->rank; }
int Group::size() const { return state_->size; }
int Group::node() const { return state_->node; }
int Group::num_nodes() const { return state_->nodes; }
const Group& Group::local() const { return *state_->local_group; }
const Group& Group::cross() const { return *state_->cross_group; }

Group Group::split(int color, int key) const {
  check(color >= 0, "split", "color = ", color, " but must be >= 0");
  std::shared_ptr<GroupState> state;
  detail::with_mpi_deadline("split (MPI_Comm_split and the new group's set-up)", timeout_seconds(),
                            "SOL_COMM_TIMEOUT_S", [&] {
                              MPI_Comm sub = MPI_COMM_NULL;
                              MPI_Comm_split(state_->comm, color, key, &sub);
                              state = std::make_shared<GroupState>(sub, state_->node_id);
                            });
  return Group(std::move(state));
}

std::string_view reduce_op_name(ReduceOp op) { return op == ReduceOp::sum ? "sum" : "max"; }

ReduceOp parse_reduce_op(std::string_view name) {
  if (name == "sum") return ReduceOp::sum;
  if (name == "max") return ReduceOp::max;
  fail("parse_reduce_op", "unknown reduction '", name, "': expected sum or max");
}

void* Group::heap_alloc(size_t bytes) const {
  if (!state_->single_node()) return local().heap_alloc(bytes);
  GroupState& s = *state_;
  s.begin_step(StepOp::heap_alloc, bytes);
  s.post_and_wait("heap_alloc");
  const detail::SegmentLayout& l = s.shm->layout();
  size_t start = detail::round_up(s.heap_used, detail::kPage);
  check(start + bytes <= l.heap_bytes, "heap_alloc", bytes, " bytes requested but only ",
        l.heap_bytes - start, " of the ", l.heap_bytes,
        " byte heap are free (raise SOL_COMM_HEAP_BYTES)");
  s.heap_used = start + bytes;
  return s.shm->base(s.rank) + l.heap_offset() + start;
}

void Group::heap_reset() const {
  if (!state_->single_node()) {
    local().heap_reset();
    return;
  }
  state_->begin_step(StepOp::heap_reset, 0);
  state_->post_and_wait("heap_reset");
  state_->heap_used = 0;
}

}  // namespace sol::comm
