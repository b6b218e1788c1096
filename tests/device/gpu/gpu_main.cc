#include <cstdlib>
#include <exception>

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

}  // namespace sol::gpu_test

int main(int argc, char** argv) {
  using namespace sol::gpu_test;
  if (argc == 2 && std::string(argv[1]) == "--list") {
    for (const auto& [name, f] : registry()) std::printf("%s\n", name.c_str());
    return 0;
  }
  const sol::CudaDiscovery& found = sol::cuda_discovery();
  if (found.devices.empty()) {
    std::printf("SKIP: no CUDA device: %s\n", found.reason.c_str());
    return 77;
  }
  int ran = 0;
  for (const auto& [name, f] : registry()) {
    if (argc >= 2 && name != argv[1]) continue;
    ++ran;
    std::printf("[ RUN ] %s\n", name.c_str());
    const int before = failures;
    try {
      f();
    } catch (const std::exception& e) {
      record_failure(__FILE__, __LINE__, std::string("exception: ") + e.what());
    }
    std::printf("[ %s ] %s\n", failures == before ? "OK" : "FAILED", name.c_str());
  }
  if (ran == 0) {
    std::fprintf(stderr, "no test named %s\n", argc >= 2 ? argv[1] : "(any)");
    return 1;
  }
  return failures ? 1 : 0;
}
