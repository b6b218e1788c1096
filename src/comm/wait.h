#pragma once
// Bounded waiting: every spin in comm ends in success, a dead peer, or the deadline, and the
// latter two throw sol::CommError naming the op, the peer and what it waited for.
#include <immintrin.h>
#include <sched.h>

#include <string>
#include <string_view>

#include "sol/comm.h"
#include "sol/timing.h"

namespace sol::comm::detail {

// What a wait is for; only read when it fails.
struct WaitFor {
  std::string_view op;
  int peer = -1;      // world rank of the peer waited for (-1: none in particular)
  int peer_pid = 0;   // checked for liveness while waiting (0: not checkable, e.g. remote)
  std::string what;   // "step 12 (data posted)"
};

// Marks this process as failed (so exit skips MPI_Finalize, which could hang on a dead
// peer) and throws the CommError.
[[noreturn]] void comm_failure(const std::string& message);
[[noreturn]] void wait_failed(const WaitFor& w, double waited_s, bool peer_dead);
bool process_alive(int pid);

// Spins on `ready` (cheap, e.g. an acquire load). Pure spinning first (a peer on another core
// answers within a microsecond); then yields, because with more ranks than cores the peer we
// wait for may need this very core. Clock and liveness checks are amortised over spins.
// 256 pauses are several microseconds here, past any healthy cross-core answer; 4096 (tried
// first) cost 100-200 us per step whenever two ranks shared a core (docs/perf/comm.md).
inline constexpr int kPureSpins = 256;
template <class Ready, class Describe>
void wait_until(Ready&& ready, Describe&& describe) {
  for (int i = 0; i < kPureSpins; ++i) {
    if (ready()) return;
    _mm_pause();
  }
  const double start = now_seconds();
  const double limit = timeout_seconds();
  double next_check = start + 0.05;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return;
      sched_yield();
    }
    double now = now_seconds();
    if (now < next_check) continue;
    next_check = now + 0.05;
    WaitFor w = describe();
    if (w.peer_pid > 0 && !process_alive(w.peer_pid) && !ready()) wait_failed(w, now - start, true);
    if (now - start > limit && !ready()) wait_failed(w, now - start, false);
  }
}

}  // namespace sol::comm::detail
