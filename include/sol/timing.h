#pragma once
// The timing harness every benchmark uses: warm-up, then repetitions until both a minimum
// time and a minimum count are reached; median, min and max of the per-run times.
#include <functional>

namespace sol {

struct TimingOptions {
  double min_seconds = 0.2;   // keep repeating until this much time was spent timing...
  int min_runs = 10;          // ...and at least this many runs were taken
  int max_runs = 1000000;
  double warmup_seconds = 0.05;
  int warmup_runs = 2;
  // Cold mode: the op is called with set = 0, 1, 2, ... (mod input_sets), so consecutive runs
  // touch different buffers; the caller sizes the sets so that together they exceed the LLC.
  // The warm-up runs every set at least once, whatever warmup_runs and warmup_seconds say.
  int input_sets = 1;
  // What a run's time is: wall-clock (steady clock), or the CPU time of the calling thread
  // (CLOCK_THREAD_CPUTIME_ID). The thread clock does not count time the thread spent waiting
  // for a core, so on a loaded, shared machine it is the stable figure for a one-thread op —
  // and meaningless for an op that runs on other threads too (bench refuses that).
  enum class Clock { wall, thread_cpu } clock = Clock::wall;
};

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
  int runs = 0;
};

double now_seconds();         // steady clock
double thread_cpu_seconds();  // CPU time of the calling thread
Timing time_runs(const std::function<void(int set)>& run, const TimingOptions& opt = {});

}  // namespace sol
