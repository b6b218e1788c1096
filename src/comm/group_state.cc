// GroupState: placing ranks on nodes, building the local and cross sub-groups, and the step
// protocol that orders everything the ranks of one node do through shared memory.
#include "comm/group_state.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>

#include "comm/p2p_engine.h"
#include "comm/wait.h"
#include "comm/world.h"
#include "sol/dtype.h"

namespace sol::comm::detail {

namespace {

// Sizes take K/M/G suffixes (binary), like the CLI.
size_t env_bytes(const char* name, size_t fallback) {
  const char* text = std::getenv(name);
  if (!text || !*text) return fallback;
  char* end = nullptr;
  double v = std::strtod(text, &end);
  double scale = 1;
  if (end && (*end == 'K' || *end == 'k')) scale = 1024.0, ++end;
  else if (end && (*end == 'M' || *end == 'm')) scale = 1024.0 * 1024, ++end;
  else if (end && (*end == 'G' || *end == 'g')) scale = 1024.0 * 1024 * 1024, ++end;
  check(end && *end == 0 && v >= 0, name, "expected a byte size like 512M, got '", text, "'");
  return size_t(v * scale);
}

// The user heap is reserved, not touched: tmpfs commits pages only when written, so a large
// default costs nothing until buffers are used.
SegmentLayout layout_from_env() {
  SegmentLayout l;
  l.heap_bytes = round_up(env_bytes("SOL_COMM_HEAP_BYTES", size_t(1) << 30), kPage);
  return l;
}

// A non-owning handle: a group's local() (or cross()) may be the group itself.
Group alias_of(GroupState* self) { return Group(std::shared_ptr<GroupState>(std::shared_ptr<GroupState>(), self)); }

Group split_into(MPI_Comm parent, int color, int key, int node_id) {
  MPI_Comm sub = MPI_COMM_NULL;
  MPI_Comm_split(parent, color, key, &sub);
  return Group(std::make_shared<GroupState>(sub, node_id));
}

}  // namespace

std::string_view step_op_name(StepOp op) {
  switch (op) {
    case StepOp::bootstrap: return "bootstrap";
    case StepOp::barrier: return "barrier";
    case StepOp::allreduce: return "allreduce";
    case StepOp::reduce_scatter: return "reduce_scatter";
    case StepOp::all_gather: return "all_gather";
    case StepOp::all_to_all: return "all_to_all";
    case StepOp::all_to_all_v: return "all_to_all_v";
    case StepOp::broadcast: return "broadcast";
    case StepOp::heap_alloc: return "heap_alloc";
    case StepOp::heap_reset: return "heap_reset";
  }
  return "unknown";
}

GroupState::GroupState(MPI_Comm c, int id) : comm(c), node_id(id) {
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  // MPI failures come back as codes and become CommErrors instead of aborting the job.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Group mine = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  MPI_Comm_group(comm, &mine);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> group_ranks(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) group_ranks[size_t(r)] = r;
  world_rank_of.resize(size_t(size));
  MPI_Group_translate_ranks(mine, size, group_ranks.data(), world, world_rank_of.data());
  MPI_Group_free(&mine);
  MPI_Group_free(&world);
  std::vector<int> ids(static_cast<size_t>(size));
  MPI_Allgather(&node_id, 1, MPI_INT, ids.data(), 1, MPI_INT, comm);
  std::vector<int> seen;  // node ids in order of their first rank
  node_of.resize(size_t(size));
  local_of.resize(size_t(size));
  for (int r = 0; r < size; ++r) {
    auto it = std::find(seen.begin(), seen.end(), ids[size_t(r)]);
    int n = int(it - seen.begin());
    if (it == seen.end()) {
      seen.push_back(ids[size_t(r)]);
      ranks_of_node.emplace_back();
    }
    node_of[size_t(r)] = n;
    local_of[size_t(r)] = int(ranks_of_node[size_t(n)].size());
    ranks_of_node[size_t(n)].push_back(r);
  }
  nodes = int(seen.size());
  node = node_of[size_t(rank)];
  for (const auto& members : ranks_of_node) uniform_nodes &= members.size() == ranks_of_node[0].size();

  if (single_node()) {
    shm = std::make_unique<SharedSegments>(comm, layout_from_env());
    local_group.emplace(alias_of(this));
    if (size == 1) cross_group.emplace(alias_of(this));
    else cross_group.emplace(split_into(comm, rank, 0, node_id));
  } else {
    local_group.emplace(split_into(comm, node, rank, node_id));
    // One rank per node: the group is its own cross group (splitting again would recurse).
    if (nodes == size) cross_group.emplace(alias_of(this));
    else cross_group.emplace(split_into(comm, local_of[size_t(rank)], rank, node_id));
  }
}

GroupState::~GroupState() {
  local_group.reset();
  cross_group.reset();
  p2p.reset();
  shm.reset();
  // After a failed wait a peer may be gone; freeing needs nothing from peers in Open MPI,
  // but after finalisation (or a failure) MPI must not be touched at all.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !process_failed() && comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
}

StepRecord& GroupState::begin_step(StepOp op, uint64_t bytes, uint32_t dtype, uint32_t reduce,
                                   int32_t root) {
  ++step;
  StepRecord& r = shm->control(rank).records[step % 2];
  r = StepRecord{};
  r.op = uint8_t(op);
  r.bytes = bytes;
  r.dtype = uint8_t(dtype);
  r.reduce = uint8_t(reduce);
  r.root = root;
  return r;
}

void GroupState::post_and_wait(std::string_view op) {
  shm->control(rank).step.store(step, std::memory_order_release);
  const StepRecord& mine = record(rank);
  for (int p = 0; p < size; ++p) {
    if (p == rank) continue;
    const auto& flag = shm->control(p).step;
    const uint64_t s = step;
    wait_until([&] { return flag.load(std::memory_order_acquire) >= s; },
               [&] {
                 return WaitFor{op, world_rank_of[size_t(p)], shm->pid(p),
                                "local step " + std::to_string(s) + " (" +
                                    std::string(step_op_name(StepOp(mine.op))) + " data posted)"};
               });
    const StepRecord& theirs = record(p);
    if (theirs.op != mine.op || theirs.bytes != mine.bytes || theirs.dtype != mine.dtype ||
        theirs.reduce != mine.reduce || theirs.root != mine.root ||
        theirs.zero_copy != mine.zero_copy) {
      std::ostringstream os;
      auto describe = [&](const StepRecord& r) {
        os << step_op_name(StepOp(r.op)) << " (" << r.bytes << " bytes, dtype "
           << (r.op == uint8_t(StepOp::barrier) ? "-" : std::string(dtype_name(DType(r.dtype))))
           << ", reduce " << reduce_op_name(ReduceOp(r.reduce)) << ", root " << r.root
           << (r.zero_copy ? ", heap buffers" : ", private buffers") << ")";
      };
      os << op << ": ranks disagree at local step " << step << ": rank " << world_rank_of[size_t(p)]
         << " called ";
      describe(theirs);
      os << " but rank " << world_rank_of[size_t(rank)] << " called ";
      describe(mine);
      comm_failure(os.str());
    }
  }
}

}  // namespace sol::comm::detail
