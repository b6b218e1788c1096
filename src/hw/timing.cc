#include "sol/timing.h"

#include <algorithm>
#include <time.h>

#include <chrono>
#include <vector>

#include "sol/error.h"

namespace sol {

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

double thread_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

Timing time_runs(const std::function<void(int set)>& run, const TimingOptions& opt) {
  check(opt.input_sets >= 1, "time_runs", "input_sets = ", opt.input_sets, " but must be >= 1");
  check(opt.min_runs >= 1 && opt.max_runs >= opt.min_runs, "time_runs", "min_runs = ", opt.min_runs,
        ", max_runs = ", opt.max_runs);
  int set = 0;
  auto next_set = [&] {
    int s = set;
    set = (set + 1) % opt.input_sets;
    return s;
  };
  // Warm-up: page faults, caches, clocks and lazily initialised state settle before timing.
  // Every input set runs once here: a set's outputs are fresh pages until their first run, and
  // a timed run that faults them in measures the kernel's page clearing, not the op.
  double warm_start = now_seconds();
  for (int i = 0; i < opt.warmup_runs || i < opt.input_sets || now_seconds() - warm_start < opt.warmup_seconds; ++i)
    run(next_set());

  std::vector<double> t;
  t.reserve(64);
  double spent = 0;
  const auto clock = opt.clock == TimingOptions::Clock::thread_cpu ? &thread_cpu_seconds : &now_seconds;
  while (int(t.size()) < opt.max_runs && (int(t.size()) < opt.min_runs || spent < opt.min_seconds)) {
    int s = next_set();
    double t0 = clock();
    run(s);
    double dt = clock() - t0;
    t.push_back(dt);
    spent += dt;
  }
  std::sort(t.begin(), t.end());
  Timing r;
  r.runs = int(t.size());
  r.min_s = t.front();
  r.max_s = t.back();
  size_t h = t.size() / 2;
  r.median_s = t.size() % 2 ? t[h] : 0.5 * (t[h - 1] + t[h]);
  return r;
}

}  // namespace sol
