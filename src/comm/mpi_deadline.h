#pragma once
// Blocking MPI calls (start-up, communicator creation, MPI_Finalize) wait for every peer with
// no deadline of their own, and the thread inside one cannot be interrupted. A watchdog thread
// bounds them instead: if the call has not returned in time it says what was waited for and
// ends the process, and mpirun then ends the job.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sol::comm::detail {

// SOL_COMM_STARTUP_TIMEOUT_S: seconds MPI start-up and the first communicators may take
// (start-up of a loaded machine is slower than any later wait); default the larger of 60 s and
// SOL_COMM_TIMEOUT_S.
double startup_timeout_seconds();

// Runs fn(); if it has not returned within limit_s, prints "sol::comm: <what> did not complete
// within <limit_s> s (<setting>): ..." to stderr and exits with EXIT_FAILURE.
void with_mpi_deadline(const std::string& what, double limit_s, const char* setting,
                       const std::function<void()>& fn);

// For a loop of blocking MPI calls (a benchmark's MPI anchor): ends the process, as above, when
// no call has returned for limit_s. tick() after each call costs one relaxed atomic add, so the
// timed loop is not slowed the way a watchdog per call would slow it.
class MpiProgressDeadline {
 public:
  MpiProgressDeadline(std::string what, double limit_s, const char* setting);
  ~MpiProgressDeadline();
  MpiProgressDeadline(const MpiProgressDeadline&) = delete;
  MpiProgressDeadline& operator=(const MpiProgressDeadline&) = delete;
  void tick() { ticks_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> ticks_{0};
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread watchdog_;
};

}  // namespace sol::comm::detail
