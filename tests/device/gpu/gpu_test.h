#pragma once
// A self-contained test harness for the `gpu` tests: no GoogleTest, so a device machine without
// Sol's Debian dependencies can build and run them (scripts/device-check.sh). Each test is a
// function; `sol_gpu_tests NAME...` runs the named ones in that order and exits 0 (pass), 1 (fail)
// or 77 (no device: the reason is printed, and ctest reports the test as skipped);
// `sol_gpu_tests --no-bench` runs every test but the benches, `--list` names them all.
#include <cstdio>
#include <functional>
#include <map>
#include <sstream>
#include <string>

namespace sol::gpu_test {

std::map<std::string, std::function<void()>>& registry();

// A bench (timings for device-check.sh, run only by name): its name starts with bench_ or holds
// _bench_. Everything else is a correctness test, which `--no-bench` runs, except:
bool is_bench(const std::string& name);

// A first-run test (its name ends in _first_run) checks a kernel that has not yet run on any
// device: `--no-bench` leaves it out and device-check.sh runs each in a step of its own after the
// others, so a hang there costs that step only. Renamed once it has passed on a device.
bool is_first_run(const std::string& name);

struct Register {
  Register(const char* name, std::function<void()> f) { registry()[name] = std::move(f); }
};

// Counts a failure and prints it; the test goes on (the exit code reports it).
void record_failure(const char* file, int line, const std::string& what);

#define SOL_GPU_TEST(name)                                                    \
  static void gpu_test_##name();                                              \
  static ::sol::gpu_test::Register gpu_test_register_##name(#name, gpu_test_##name); \
  static void gpu_test_##name()

template <class... Parts>
std::string message(const char* condition, Parts&&... parts) {
  std::ostringstream os;
  os << condition;
  if constexpr (sizeof...(Parts) > 0) {
    os << ": ";
    (os << ... << parts);
  }
  return os.str();
}

#define SOL_EXPECT(cond, ...)                                                                   \
  do {                                                                                          \
    if (!(cond))                                                                                \
      ::sol::gpu_test::record_failure(__FILE__, __LINE__,                                      \
                                      ::sol::gpu_test::message(#cond __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

}  // namespace sol::gpu_test
