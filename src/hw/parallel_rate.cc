#include "hw/parallel_rate.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "sol/error.h"

namespace sol {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

// The best repetition, not the median: a ceiling is the most the hardware can do, and the
// neighbours on a shared host, interrupts and page walks only ever slow a repetition down.
// A median would drag the ceiling below the machine's real peak, and a ceiling measured low
// flatters every op's SOL%. Repetitions too short to time well never count (min_rep_seconds).
double best_parallel_rate(const ThreadLoop& loop, const RateOptions& o) {
  check(o.threads >= 1, "measure_ceiling", "threads = ", o.threads, " but must be >= 1");
  check(o.seconds > 0, "measure_ceiling", "seconds = ", o.seconds, " but must be > 0");
  const int n = o.threads;
  std::vector<double> start(n), end(n), work(n);
  double best = 0;
  long iterations = 1;
  bool done = false;
  int team_size = 0;
  const double deadline = now_seconds() + o.seconds;
#pragma omp parallel num_threads(n)
  {
    const int t = omp_get_thread_num();
#pragma omp single
    team_size = omp_get_num_threads();
    // single ends in a barrier, so every thread sees team_size here.
    while (team_size == n && !done) {
#pragma omp barrier
      start[t] = now_seconds();
      work[t] = loop(t, iterations);
      end[t] = now_seconds();
#pragma omp barrier
#pragma omp single
      {
        double first = *std::min_element(start.begin(), start.end());
        double last = *std::max_element(end.begin(), end.end());
        double elapsed = std::max(last - first, 1e-9);
        double total = 0;
        double least_busy = elapsed;  // the thread least delayed by preemption tells the speed
        for (int i = 0; i < n; ++i) {
          total += work[i];
          least_busy = std::min(least_busy, std::max(end[i] - start[i], 1e-9));
        }
        if (least_busy >= o.min_rep_seconds) best = std::max(best, total / elapsed);
        // Scaled by the work time, not the wall time: on a loaded machine a thread may wait
        // milliseconds for a core, and a wall-time calibration would then never grow.
        if (least_busy < o.rep_seconds)
          iterations = std::max(iterations + 1,
                                long(double(iterations) *
                                     std::min(64.0, 1.25 * o.rep_seconds / least_busy)));
        done = best > 0 && last + elapsed > deadline;
      }
    }
  }
  check(team_size == n, "measure_ceiling", "asked OpenMP for ", n, " threads but got ",
        team_size, " (nested parallel region or OMP_THREAD_LIMIT?)");
  return best;
}

}  // namespace sol
