// MPI start-up and shutdown (bounded by watchdogs and the comm deadline), and the world group with its
// (emulated) nodes.
#include "comm/world.h"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>

#include "comm/group_state.h"
#include "comm/mpi_deadline.h"
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

// A failure at exit cannot be thrown to anyone: say what it was and leave without finalising.
// mpirun ends the whole job when the first rank exits, so wait a moment first: the other
// ranks waiting in the same barrier time out at about the same time, and one of them may be
// the one that can name the stopped peer (a rank on another node only sees its node leader).
[[noreturn]] void exit_failed(const std::string& what) {
  std::fprintf(stderr, "sol::comm teardown: %s\n", what.c_str());
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::_Exit(EXIT_FAILURE);
}

// MPI_Finalize waits for every peer and never returns if one of them has stopped (SIGSTOP, a
// debugger, a hung thread). A barrier with the comm deadline first names such a peer; a peer
// that stops between that barrier and its own MPI_Finalize is caught by the watchdog.
void finalize_with_deadline() {
  try {
    world_group->barrier();
  } catch (const std::exception& e) {
    exit_failed(std::string("the barrier before MPI_Finalize failed: ") + e.what());
  }
  world_group.reset();
  with_mpi_deadline("MPI_Finalize after the final barrier", timeout_seconds(), "SOL_COMM_TIMEOUT_S",
                    [] { MPI_Finalize(); });
}

void shut_down() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initialised_here && !finalized && !failed && world_group) return finalize_with_deadline();
  world_group.reset();
}
}  // namespace

void mark_process_failed() { failed = true; }
bool process_failed() { return failed; }

}  // namespace detail

Group& Group::world() {
  using namespace detail;
  if (!world_group) {
    // Start-up waits for every rank inside MPI; a rank that never arrives must not hang the rest.
    with_mpi_deadline("start-up (MPI_Init, node discovery, shared segments)", startup_timeout_seconds(),
                      "SOL_COMM_STARTUP_TIMEOUT_S", [] {
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
                      });
    std::atexit(shut_down);
  }
  return *world_group;
}

}  // namespace sol::comm
