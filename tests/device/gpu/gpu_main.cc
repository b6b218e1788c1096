#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "gpu_test.h"
#include "sol/device.h"

namespace sol::gpu_test {

namespace {
int failures = 0;
}

std::map<std::string, std::function<void()>>& registry() {
  static std::map<std::string, std::function<void()>> r;
  return r;
}

void record_failure(const char* file, int line, const std::string& what) {
  ++failures;
  std::fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what.c_str());
}

bool is_bench(const std::string& name) {
  return name.rfind("bench_", 0) == 0 || name.find("_bench_") != std::string::npos;
}

bool is_first_run(const std::string& name) {
  const std::string tail = "_first_run";
  return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace sol::gpu_test

namespace {

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--list | --list-benches | --list-first-run | --no-bench | NAME...]\n"
               "  (none)          every test, benches included, in name order\n"
               "  --no-bench      every test but the benches (names starting bench_ or holding _bench_)\n"
               "                  and the first-run tests (names ending _first_run: kernels not yet run\n"
               "                  on a device, which device-check.sh runs one step each)\n"
               "  NAME...         the named tests, in the order given (benches too)\n"
               "  --list          every name;  --list-benches, --list-first-run  those names\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sol::gpu_test;
  // Line-buffered: a run whose output goes to a file and is killed by a timeout keeps every
  // line it printed (stderr is unbuffered already).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--list" || args[0] == "--list-benches" || args[0] == "--list-first-run")) {
    for (const auto& [name, f] : registry())
      if (args[0] == "--list" || (args[0] == "--list-benches" ? is_bench(name) : is_first_run(name)))
        std::printf("%s\n", name.c_str());
    return 0;
  }
  // What runs: all, all but the benches, or the named ones in the order given.
  std::vector<std::string> chosen;
  if (args.empty() || (args.size() == 1 && args[0] == "--no-bench")) {
    const bool no_bench = !args.empty();
    for (const auto& [name, f] : registry())
      if (!no_bench || (!is_bench(name) && !is_first_run(name))) chosen.push_back(name);
  } else {
    for (const std::string& a : args) {
      if (a.rfind("--", 0) == 0) return usage(argv[0]);
      if (!registry().count(a)) {
        std::fprintf(stderr, "no test named %s (--list names them)\n", a.c_str());
        return 1;
      }
      chosen.push_back(a);
    }
  }
  const sol::CudaDiscovery& found = sol::cuda_discovery();
  if (found.devices.empty()) {
    std::printf("SKIP: no CUDA device: %s\n", found.reason.c_str());
    return 77;
  }
  if (chosen.empty()) {
    std::fprintf(stderr, "no test to run\n");
    return 1;
  }
  std::string failed;
  for (const std::string& name : chosen) {
    std::printf("[ RUN ] %s\n", name.c_str());
    const int before = failures;
    const auto start = std::chrono::steady_clock::now();
    try {
      registry().at(name)();
    } catch (const std::exception& e) {
      record_failure(__FILE__, __LINE__, std::string("exception: ") + e.what());
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const bool ok = failures == before;
    if (!ok) failed += (failed.empty() ? "" : " ") + name;
    std::printf("[ %s ] %s (%.1f s)\n", ok ? "OK" : "FAILED", name.c_str(), s);
  }
  // The last line: what device-check.sh puts in its step's detail.
  if (failed.empty()) std::printf("gpu tests: %zu passed\n", chosen.size());
  else std::printf("gpu tests: %zu run, failed: %s\n", chosen.size(), failed.c_str());
  return failed.empty() ? 0 : 1;
}
