// MPI start-up and shutdown, and the world group with its (emulated) nodes.
#include "comm/world.h"

#include <mpi.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

#include "comm/group_state.h"
#include "sol/comm.h"

namespace sol::comm {

namespace detail {

namespace {
std::atomic<bool> failed{false};
bool initialised_here = false;
std::unique_ptr<Group> world_group;

// SOL_LOCAL_SIZE=k cuts each host's ranks (in host order) into emulated nodes of k.
int emulated_local_size() {
  const char* text = std::getenv("SOL_LOCAL_SIZE");
  if (!text || !*text) return 0;
  char* end = nullptr;
  long k = std::strtol(text, &end, 10);
  check(end && *end == 0 && k > 0, "SOL_LOCAL_SIZE", "expected a positive rank count, got '", text, "'");
  return int(k);
}

int world_node_id() {
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm host = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &host);
  int host_rank = 0, host_size = 1, leader = 0;
  MPI_Comm_rank(host, &host_rank);
  MPI_Comm_size(host, &host_size);
  MPI_Allreduce(&world_rank, &leader, 1, MPI_INT, MPI_MIN, host);
  MPI_Comm_free(&host);
  int k = emulated_local_size();
  if (k == 0) k = host_size;
  // Unique across hosts: a host's leader is the lowest world rank on it.
  return leader * host_size + host_rank / k;
}

void shut_down() {
  world_group.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initialised_here && !finalized && !failed) MPI_Finalize();
}
}  // namespace

void mark_process_failed() { failed = true; }
bool process_failed() { return failed; }

}  // namespace detail

Group& Group::world() {
  using namespace detail;
  if (!world_group) {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      initialised_here = true;
    }
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    world_group = std::make_unique<Group>(std::make_shared<GroupState>(comm, world_node_id()));
    std::atexit(shut_down);
  }
  return *world_group;
}

}  // namespace sol::comm
