#include "sol/threads.h"

#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "sol/error.h"

namespace sol {

namespace {
std::atomic<int> g_override{0};
}

int hardware_threads() { return omp_get_num_procs(); }

int num_threads() {
  if (int n = g_override.load(); n > 0) return n;
  if (const char* env = std::getenv("SOL_NUM_THREADS"); env && *env) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    check(*end == '\0' && n >= 1 && n <= 4096, "SOL_NUM_THREADS",
          "expected a positive integer but got '", env, "'");
    return int(n);
  }
  return hardware_threads();
}

void set_num_threads(int n) {
  check(n >= 0, "set_num_threads", "n = ", n, " but must be >= 0 (0 restores the default)");
  g_override.store(n);
}

}  // namespace sol
