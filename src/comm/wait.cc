// Failure reporting of bounded waits, and the process-wide "a comm wait failed" mark.
#include "comm/wait.h"

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "comm/world.h"

namespace sol::comm {

double timeout_seconds() {
  static const double seconds = [] {
    const char* text = std::getenv("SOL_COMM_TIMEOUT_S");
    if (!text || !*text) return 60.0;
    char* end = nullptr;
    double v = std::strtod(text, &end);
    check(end && *end == 0 && v > 0, "SOL_COMM_TIMEOUT_S", "expected a positive number of seconds, got '",
          text, "'");
    return v;
  }();
  return seconds;
}

namespace detail {

void comm_failure(const std::string& message) {
  mark_process_failed();
  throw CommError(message);
}

void wait_failed(const WaitFor& w, double waited_s, bool peer_dead) {
  std::ostringstream peer;
  if (w.peer >= 0) peer << "rank " << w.peer;
  else peer << "peers";
  if (w.peer_pid > 0) peer << " (pid " << w.peer_pid << ")";
  std::ostringstream os;
  os.precision(3);
  os << std::fixed << w.op << ": ";
  if (peer_dead)
    os << peer.str() << " exited while this rank waited " << waited_s << " s for " << w.what;
  else
    os << "timed out after " << waited_s << " s (SOL_COMM_TIMEOUT_S) waiting for " << peer.str()
       << ": " << w.what;
  comm_failure(os.str());
}

bool process_alive(int pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

}  // namespace detail
}  // namespace sol::comm
