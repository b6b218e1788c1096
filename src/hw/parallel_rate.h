#pragma once
// Times a per-thread loop on N threads and returns the best rate of several repetitions.
#include <functional>

namespace sol {

// Runs `iterations` units of work on thread `thread` and returns the work done.
using ThreadLoop = std::function<double(int thread, long iterations)>;

struct RateOptions {
  int threads = 1;
  double seconds = 0.25;         // time to spend, repetitions included (at least one counts)
  double rep_seconds = 0.01;     // iterations are scaled until one repetition takes this long
  double min_rep_seconds = 2e-3; // shorter repetitions only calibrate: timer error and clock
                                 // ramps would make them noise, and noise must not set a peak
};

// Work per second of the fastest repetition: total work of all threads over the wall time
// from the first thread's start to the last thread's end.
double best_parallel_rate(const ThreadLoop& loop, const RateOptions& options);

}  // namespace sol
