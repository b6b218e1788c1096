// The inter-process copy ceiling without mpirun, for `sol hw`: the calling process forks
// ranks - 1 children that share one anonymous shared mapping, and every rank copies a message
// from the next rank's region into its own, all at once — the transfer `sol comm bench` pairs
// with each op (copy_ceiling.cc), measured the same way (one thread per rank, median of five
// batches of the slowest rank's mean copy time). Cached beside the machine profile.
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hw/kernel_select.h"
#include "kernels/move_bytes.h"
#include "hw/streaming.h"
#include "sol/comm_bench.h"
#include "sol/hw.h"
#include "sol/timing.h"

namespace sol::comm {

namespace {

using nlohmann::json;

constexpr int kBatches = 5;
static_assert(kBatches > 0);
constexpr double kDeadlineSeconds = 30;

struct alignas(64) Control {
  std::atomic<uint64_t> arrived{0};
  std::atomic<int> failed{0};
  alignas(64) double seconds[32] = {};
};

// Every rank arrives once per round; round k is complete when k * ranks have arrived.
bool barrier(Control& c, int ranks, uint64_t round) {
  c.arrived.fetch_add(1, std::memory_order_acq_rel);
  const double start = now_seconds();
  for (uint64_t spins = 0;; ++spins) {
    if (c.arrived.load(std::memory_order_acquire) >= round * uint64_t(ranks)) return true;
    if (c.failed.load(std::memory_order_relaxed)) return false;
    if (spins % 64 == 63) {
      sched_yield();
      if (now_seconds() - start > kDeadlineSeconds) {
        c.failed.store(1);
        return false;
      }
    }
  }
}

int iterations_for(size_t bytes) {
  return int(std::clamp<size_t>((size_t(256) << 20) / std::max<size_t>(bytes, 1), 5, 2000));
}

// What one rank does: for each size and batch, copy from the next rank's source region into
// its own destination region between barriers and post its mean copy time; rank 0 also
// collects the slowest rank's time of every batch (into `slowest`, per size).
bool run_rank(Control& c, std::byte* base, int rank, int ranks, const std::vector<size_t>& sizes, size_t region,
              std::vector<std::vector<double>>* slowest) {
  std::byte* src = base + (2 * size_t(rank)) * region;
  std::byte* dst = src + region;
  const std::byte* peer_src = base + (2 * size_t((rank + 1) % ranks)) * region;
  std::memset(src, 0x5A, region);
  std::memset(dst, 0, region);
  const kernels::MoveKernels& mk = select_kernels(kernels::move_kernel_table(), "shm copy ceiling");
  uint64_t round = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const size_t bytes = sizes[k];
    const int iters = iterations_for(bytes);
    const bool stream = should_stream(int64_t(bytes));
    for (int b = 0; b < kBatches; ++b) {
      if (!barrier(c, ranks, ++round)) return false;
      const double start = now_seconds();
      for (int i = 0; i < iters; ++i) mk.copy(dst, peer_src, int64_t(bytes), stream, /*fence=*/true);
      c.seconds[rank] = (now_seconds() - start) / iters;
      if (!barrier(c, ranks, ++round)) return false;
      if (slowest) (*slowest)[k].push_back(*std::max_element(c.seconds, c.seconds + ranks));
      // Nobody overwrites its time before rank 0 has read them all.
      if (!barrier(c, ranks, ++round)) return false;
    }
  }
  return true;
}

}  // namespace

std::vector<ShmCopyCeiling> measure_shm_copy_ceilings(const std::vector<int>& rank_counts,
                                                      const std::vector<size_t>& sizes) {
  check(!sizes.empty() && *std::min_element(sizes.begin(), sizes.end()) > 0, "shm copy ceiling",
        "expected at least one message size, all above 0");
  std::vector<ShmCopyCeiling> out;
  for (int ranks : rank_counts) {
    check(ranks >= 2 && ranks <= 32, "shm copy ceiling", "ranks = ", ranks, " but must be in 2..32");
    const size_t region = *std::max_element(sizes.begin(), sizes.end());
    const size_t control_bytes = (sizeof(Control) + 4095) / 4096 * 4096;
    const size_t total = control_bytes + 2 * size_t(ranks) * region;
    void* mem = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) fail("shm copy ceiling", "mmap of ", total, " shared bytes failed: ", std::strerror(errno));
    auto* control = new (mem) Control();
    std::byte* base = static_cast<std::byte*>(mem) + control_bytes;
    std::vector<pid_t> children;
    for (int r = 1; r < ranks; ++r) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        // Only async-signal-safe work and plain loops here: the child must not start threads.
        ::_exit(run_rank(*control, base, r, ranks, sizes, region, nullptr) ? 0 : 1);
      }
      if (pid < 0) {
        control->failed.store(1);
        break;
      }
      children.push_back(pid);
    }
    // Rank 0 is this process.
    std::vector<std::vector<double>> per_size(sizes.size());
    if (!control->failed.load()) run_rank(*control, base, 0, ranks, sizes, region, &per_size);
    const bool failed = control->failed.load() != 0;
    for (pid_t pid : children) ::waitpid(pid, nullptr, 0);
    ::munmap(mem, total);
    check(!failed, "shm copy ceiling", "a forked rank did not keep up (", ranks,
          " ranks; deadline ", kDeadlineSeconds, " s)");
    for (size_t k = 0; k < sizes.size(); ++k) {
      std::vector<double>& t = per_size[k];
      std::sort(t.begin(), t.end());
      const double median = t[t.size() / 2];
      out.push_back({ranks, sizes[k], median > 0 ? double(sizes[k]) / median / 1e9 : 0});
    }
  }
  return out;
}

std::string shm_copy_ceiling_cache_path() {
  return (std::filesystem::path(machine_cache_path()).parent_path() / "comm_ceiling.json").string();
}

std::vector<ShmCopyCeiling> shm_copy_ceilings(bool remeasure) {
  const CpuFeatures& f = cpu_features();
  const std::string key = f.model_name + "|" + std::to_string(f.logical_cpus);
  std::string path;
  json all = json::object();
  try {
    path = shm_copy_ceiling_cache_path();
    std::ifstream in(path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
      if (j.is_object()) all = j;
    }
  } catch (const Error&) {
    path.clear();  // no cache location: measure every time
  }
  if (!remeasure && all.contains(key) && all[key].is_array() && !all[key].empty()) {
    std::vector<ShmCopyCeiling> cached;
    for (const json& e : all[key])
      if (e.is_object() && e.contains("ranks") && e.contains("bytes") && e.contains("gbps"))
        cached.push_back({e["ranks"].get<int>(), e["bytes"].get<size_t>(), e["gbps"].get<double>()});
    if (!cached.empty()) return cached;
  }
  // Two ranks always (they fit any machine with two cores); the full core count as well when
  // it differs and stays small enough to fork cheaply.
  std::vector<int> rank_counts = {2};
  if (f.logical_cpus > 2 && f.logical_cpus <= 8) rank_counts.push_back(f.logical_cpus);
  const std::vector<size_t> sizes = {size_t(64) << 10, size_t(1) << 20, size_t(16) << 20, size_t(64) << 20};
  std::vector<ShmCopyCeiling> measured = measure_shm_copy_ceilings(rank_counts, sizes);
  if (!path.empty()) {
    json entry = json::array();
    for (const ShmCopyCeiling& c : measured) entry.push_back({{"ranks", c.ranks}, {"bytes", c.bytes}, {"gbps", c.gbps}});
    all[key] = entry;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    const std::string temp = path + "." + std::to_string(::getpid());
    std::ofstream out(temp);
    out << all.dump(2) << "\n";
    out.close();
    // A cache only saves time: failing to write it is not an error of the measurement.
    if (!out || std::rename(temp.c_str(), path.c_str()) != 0) std::remove(temp.c_str());
  }
  return measured;
}

}  // namespace sol::comm
