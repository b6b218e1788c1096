#include "comm/mpi_deadline.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "sol/comm.h"
#include "sol/error.h"

namespace sol::comm::detail {

double startup_timeout_seconds() {
  static const double seconds = [] {
    const char* text = std::getenv("SOL_COMM_STARTUP_TIMEOUT_S");
    if (!text || !*text) return std::max(60.0, timeout_seconds());
    char* end = nullptr;
    double v = std::strtod(text, &end);
    check(end && *end == 0 && v > 0, "SOL_COMM_STARTUP_TIMEOUT_S",
          "expected a positive number of seconds, got '", text, "'");
    return v;
  }();
  return seconds;
}

namespace {
[[noreturn]] void exit_past_deadline(const std::string& what, double limit_s, const char* setting) {
  std::fprintf(stderr,
               "sol::comm: %s did not complete within %g s (%s): a peer has not started, has stopped "
               "or has died\n",
               what.c_str(), limit_s, setting);
  std::fflush(stderr);
  std::_Exit(EXIT_FAILURE);
}
}  // namespace

// One call is a loop of one: the limit runs from the start, since nothing ticks.
void with_mpi_deadline(const std::string& what, double limit_s, const char* setting,
                       const std::function<void()>& fn) {
  MpiProgressDeadline deadline(what, limit_s, setting);  // stopped on return and on a throw
  fn();
}

MpiProgressDeadline::MpiProgressDeadline(std::string what, double limit_s, const char* setting) {
  watchdog_ = std::thread([this, what = std::move(what), limit_s, setting] {
    using clock = std::chrono::steady_clock;
    const auto limit = std::chrono::duration<double>(limit_s);
    const auto poll = std::min<std::chrono::duration<double>>(limit, std::chrono::milliseconds(100));
    uint64_t seen = ticks_.load(std::memory_order_relaxed);
    auto since = clock::now();
    std::unique_lock lock(m_);
    while (!cv_.wait_for(lock, poll, [this] { return done_; })) {
      const uint64_t now_ticks = ticks_.load(std::memory_order_relaxed);
      if (now_ticks != seen) {
        seen = now_ticks;
        since = clock::now();
      } else if (clock::now() - since > limit) {
        exit_past_deadline(what, limit_s, setting);
      }
    }
  });
}

MpiProgressDeadline::~MpiProgressDeadline() {
  {
    std::lock_guard lock(m_);
    done_ = true;
  }
  cv_.notify_one();
  watchdog_.join();
}

}  // namespace sol::comm::detail
