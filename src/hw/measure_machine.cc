// measure_machine: every ceiling at one thread and at all threads, with retries where the
// neighbours on a shared host evidently got in the way.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "sol/hw.h"

namespace sol {

namespace {

constexpr double kScalingTolerance = 0.9;

bool is_dram(Unit u) { return unit_is_memory(u) && u != Unit::l2_read; }

// DRAM repetitions are whole passes of tens of milliseconds: they need the longer budget.
double budget_seconds(Unit u) { return is_dram(u) ? 0.8 : 0.4; }

// What all threads should reach if the machine scales, and how many retry rounds a shortfall
// gets: compute units and the per-core L2 add up and the clock holds, so a shortfall there is
// other work (two rounds). DRAM may really saturate with a few cores, so it gets one.
struct Expectation {
  double all_threads;
  int retry_rounds;
  bool must_scale;
};

Expectation expectation(const Ceiling& c) {
  if (c.unit == Unit::clock) return {c.one_thread, 2, true};
  if (is_dram(c.unit)) return {c.one_thread * c.threads, 1, false};
  return {c.one_thread * c.threads, 2, true};
}

bool falls_short(const Ceiling& c) {
  return c.available && c.threads > 1 &&
         c.all_threads < kScalingTolerance * expectation(c).all_threads;
}

Ceiling measure_both(Unit u, int threads) {
  Ceiling c = measure_ceiling(u, 1, budget_seconds(u));
  c.threads = threads;
  if (!c.available) return c;
  c.all_threads =
      threads == 1 ? c.one_thread : measure_ceiling(u, threads, budget_seconds(u)).all_threads;
  return c;
}

// All threads beating `threads` single threads (or the clock rising under load) means the
// single-thread run was the disturbed one.
bool one_thread_short(const Ceiling& c) {
  return c.available && c.threads > 1 && c.all_threads > expectation(c).all_threads;
}

// Measures whichever figure disagrees with how the unit scales again, keeping the best.
void retry(Ceiling& c) {
  double seconds = budget_seconds(c.unit);
  if (falls_short(c)) {
    double again = measure_ceiling(c.unit, c.threads, seconds).all_threads;
    c.all_threads = std::max(c.all_threads, again);
  } else if (one_thread_short(c)) {
    double again = measure_ceiling(c.unit, 1, seconds).one_thread;
    c.one_thread = std::max(c.one_thread, again);
  }
}

std::string shortfall_note(const Ceiling& c) {
  char text[160];
  std::snprintf(text, sizeof(text),
                "; all threads reached only %.0f%% of what one thread predicts: other work was "
                "running, measure again on a quiet machine",
                100 * c.all_threads / expectation(c).all_threads);
  return text;
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
  // Other work on a shared machine comes and goes over seconds: a retry straight away would
  // meet it again, so shortfalls are re-measured in rounds after all units, seconds apart.
  for (int round = 0; round < 2; ++round)
    for (Ceiling& c : p.ceilings)
      if (round < expectation(c).retry_rounds) retry(c);
  for (Ceiling& c : p.ceilings)
    if (expectation(c).must_scale && falls_short(c)) c.note += shortfall_note(c);
  p.measured_at = utc_now_iso8601();
  p.measure_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p;
}

}  // namespace sol
