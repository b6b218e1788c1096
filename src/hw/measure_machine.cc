// measure_machine: every ceiling at one thread and at all threads, with retries where the
// neighbours on a shared host evidently got in the way.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>
#include <string>

#include "sol/hw.h"

namespace sol {

namespace {

// What all threads should reach if the machine scales, and how many times to measure again
// when they fall short: compute units add up and the clock holds, so a shortfall there is
// the neighbours (two retries). Memory may really saturate with a few cores, so it gets one.
struct Expectation {
  double all_threads;
  int retries;
};

Expectation expectation(Unit u, double one_thread, int threads) {
  if (u == Unit::clock) return {one_thread, 2};
  if (unit_is_memory(u)) return {one_thread * threads, 1};
  return {one_thread * threads, 2};
}

// Both thread counts of one unit. Neighbours on a shared host can halve a two-thread run for
// seconds, so a shortfall is measured again and the best kept; and when all threads beat what
// one thread predicts, it was the single-thread run that was disturbed.
Ceiling measure_both(Unit u, int threads) {
  constexpr double kScalingTolerance = 0.9;
  // DRAM repetitions are whole passes of tens of milliseconds: they need the longer budget.
  bool dram = unit_is_memory(u) && u != Unit::l2_read;
  double seconds = dram ? 0.8 : 0.4;
  Ceiling c = measure_ceiling(u, 1, seconds);
  c.threads = threads;
  if (!c.available) return c;
  if (threads == 1) {
    c.all_threads = c.one_thread;
    return c;
  }
  c.all_threads = measure_ceiling(u, threads, seconds).all_threads;
  Expectation expected = expectation(u, c.one_thread, threads);
  for (int retry = 0; retry < expected.retries; ++retry) {
    if (c.all_threads >= kScalingTolerance * expected.all_threads) break;
    c.all_threads = std::max(c.all_threads, measure_ceiling(u, threads, seconds).all_threads);
  }
  if (c.all_threads > expected.all_threads)
    c.one_thread = std::max(c.one_thread, measure_ceiling(u, 1, seconds).one_thread);
  return c;
}

std::string utc_now_iso8601() {
  std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

MachineProfile measure_machine(const std::function<void(Unit)>& progress) {
  auto start = std::chrono::steady_clock::now();
  const CpuFeatures& f = cpu_features();
  MachineProfile p;
  p.cpu_model = f.model_name;
  p.cores = f.logical_cpus;
  for (Unit u : kAllUnits) {
    if (progress) progress(u);
    p.ceilings.push_back(measure_both(u, f.logical_cpus));
  }
  p.measured_at = utc_now_iso8601();
  p.measure_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p;
}

}  // namespace sol
