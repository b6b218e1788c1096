#pragma once
// What a Group is underneath: its MPI communicator, where each rank lives (node, local
// index), its local and cross sub-groups, and — for a group inside one node — the shared
// segments and the step counter of the local protocol.
#include <mpi.h>

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "comm/shared_segments.h"
#include "sol/comm.h"

namespace sol::comm::detail {

// Collectives of the local protocol; a step's record names the op so ranks that disagree
// about which collective they are in are caught.
enum class StepOp : uint32_t {
  bootstrap = 1, barrier, allreduce, reduce_scatter, all_gather, all_to_all, all_to_all_v,
  broadcast, heap_alloc, heap_reset
};
std::string_view step_op_name(StepOp op);

class ShmP2P;

struct GroupState {
  // Collective over `comm`; takes ownership of it. node_id: this rank's world-level
  // (emulated) node.
  GroupState(MPI_Comm comm, int node_id);
  ~GroupState();
  GroupState(const GroupState&) = delete;
  GroupState& operator=(const GroupState&) = delete;

  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  int node_id = 0;              // world-level node id of this rank
  int node = 0, nodes = 1;      // node index within this group
  std::vector<int> node_of;     // group rank -> node index
  std::vector<int> local_of;    // group rank -> index within its node
  std::vector<std::vector<int>> ranks_of_node;  // node index -> group ranks, ascending
  bool uniform_nodes = true;    // every node holds the same number of ranks
  std::vector<int> world_rank_of;  // group rank -> world rank: errors name peers by world rank

  std::optional<Group> local_group, cross_group;

  // Only for groups within one node.
  std::unique_ptr<SharedSegments> shm;
  uint64_t step = 0;            // steps this rank has posted
  size_t heap_used = 0;
  // Point-to-point through the mailboxes (made on first use).
  std::unique_ptr<ShmP2P> p2p;

  bool single_node() const { return nodes == 1; }
  GroupState& local() { return local_group->state(); }
  GroupState& cross() { return cross_group->state(); }

  // ---- local protocol (single-node groups) ----
  // Starts the next step: returns this rank's record for it, reset, with op/dtype/bytes set.
  StepRecord& begin_step(StepOp op, uint64_t bytes, uint32_t dtype = 0, uint32_t reduce = 0,
                         int32_t root = -1);
  // Staging slot this step may write (alternates with the step, like the records).
  std::byte* own_staging() const { return shm->staging(rank, int(step % 2)); }
  size_t staging_bytes() const { return shm->layout().staging_slot_bytes; }
  // Publishes the step (release) and waits until every peer has posted it (acquire), then
  // checks that each peer's record agrees with ours.
  void post_and_wait(std::string_view op);
  // The peer's record of the current step and the data it published.
  const StepRecord& record(int peer) const { return shm->control(peer).records[step % 2]; }
  uint64_t* own_counts() const { return shm->control(rank).counts[step % 2]; }
  const uint64_t* counts(int peer) const { return shm->control(peer).counts[step % 2]; }
  const std::byte* data(int peer) const { return shm->base(peer) + record(peer).data_offset; }
  // Offset of p in this rank's segment (-1: not in it).
  int64_t heap_offset_of(const void* p, size_t bytes) const { return shm->own_offset(p, bytes); }
};

}  // namespace sol::comm::detail
