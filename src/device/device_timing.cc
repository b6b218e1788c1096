// time_device_runs (src/device/gpu_ceilings.h): only sol/device.h's events and streams, so it
// compiles with and without the CUDA backend (without it, asking for a device is the error).
#include <algorithm>
#include <vector>

#include "device/gpu_ceilings.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

namespace {

// The seconds between consecutive events of `events`, pairwise: (0, 1), (2, 3), ...
std::vector<double> pair_times(const std::vector<Event>& events) {
  std::vector<double> t;
  for (size_t i = 0; i + 1 < events.size(); i += 2) t.push_back(elapsed_seconds(events[i], events[i + 1]));
  return t;
}

}  // namespace

Timing time_device_runs(Device device, const std::function<void(int set)>& run, const TimingOptions& opt) {
  check(!device.is_cpu(), "time_device_runs", "device = cpu; CPU runs are timed by time_runs");
  check(opt.input_sets >= 1, "time_device_runs", "input_sets = ", opt.input_sets, " but must be >= 1");
  check(opt.min_runs >= 1 && opt.max_runs >= opt.min_runs, "time_device_runs", "min_runs = ", opt.min_runs,
        ", max_runs = ", opt.max_runs);
  void* stream = current_stream(device);
  int set = 0;
  auto next_set = [&] {
    const int s = set;
    set = (set + 1) % opt.input_sets;
    return s;
  };
  // One run alone sizes the warm-up and the batch; then the warm-up runs (clocks, TLBs, the
  // JIT's first launch) go back to back.
  std::vector<Event> probe;
  probe.emplace_back(device);
  probe.emplace_back(device);
  probe[0].record(stream);
  run(next_set());
  probe[1].record(stream);
  probe[1].synchronize();
  const double one = std::max(pair_times(probe)[0], 1e-7);
  const int warmup = std::clamp(int(opt.warmup_seconds / one), std::max(opt.warmup_runs, 1), 1000);
  for (int i = 0; i < warmup; ++i) run(next_set());

  const int most = std::min(opt.max_runs, 4096);
  const int runs = std::clamp(int(opt.min_seconds / one) + 1, std::min(opt.min_runs, most), most);
  std::vector<Event> events;
  events.reserve(size_t(2 * runs));
  for (int i = 0; i < 2 * runs; ++i) events.emplace_back(device);
  for (int i = 0; i < runs; ++i) {
    events[size_t(2 * i)].record(stream);
    run(next_set());
    events[size_t(2 * i + 1)].record(stream);
  }
  events.back().synchronize();
  std::vector<double> t = pair_times(events);
  std::sort(t.begin(), t.end());
  Timing r;
  r.runs = int(t.size());
  r.min_s = t.front();
  r.max_s = t.back();
  const size_t h = t.size() / 2;
  r.median_s = t.size() % 2 ? t[h] : 0.5 * (t[h - 1] + t[h]);
  return r;
}

}  // namespace sol
