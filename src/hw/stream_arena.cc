#include "hw/stream_arena.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "hw/ceiling_loops.h"
#include "sol/hw.h"

namespace sol {

namespace {

constexpr size_t kPage = 4096;

// 512 MiB is 16x the 32 MiB L3 of the Zen 5 guests here; 4x L3 covers hosts with larger
// caches (a cyclic sweep over 4x the cache gets no hits from LRU-like replacement). The cap
// keeps small machines out of swap.
size_t arena_bytes() {
  const CpuFeatures& f = cpu_features();
  size_t wanted = std::max(size_t(512) << 20, 4 * size_t(std::max(0L, f.l3_bytes)));
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) wanted = std::min(wanted, size_t(pages) * size_t(page_size) / 4);
  size_t granule = kPage * size_t(f.logical_cpus);
  return std::max(granule, wanted / granule * granule);
}

}  // namespace

StreamArena::StreamArena() : buffer_(arena_bytes()) {
  // First touch by the thread that will stream the share in an all-threads run, so on a
  // multi-socket machine each share lands on its thread's memory node. Every float is set:
  // recycled heap memory could hold NaNs or denormals, which some cores add slowly.
  const int n = cpu_features().logical_cpus;
#pragma omp parallel num_threads(n)
  for (int share = omp_get_thread_num(); share < n; share += omp_get_num_threads()) {
    std::span<float> mine = slice(share, n);
    std::fill(mine.begin(), mine.end(), 1.0f);
  }
}

const StreamArena& StreamArena::get() {
  static const StreamArena arena;
  return arena;
}

std::span<float> StreamArena::slice(int thread, int threads) const {
  size_t pages = buffer_.bytes() / kPage;
  size_t first = pages * size_t(thread) / size_t(threads);
  size_t last = pages * size_t(thread + 1) / size_t(threads);
  float* base = static_cast<float*>(buffer_.data());
  constexpr size_t kFloatsPerPage = kPage / sizeof(float);
  return {base + first * kFloatsPerPage, (last - first) * kFloatsPerPage};
}

std::span<float> split(std::span<float> slice, int index, int count) {
  constexpr size_t kBlock = ceiling_loops::kStreamBlockFloats;
  size_t floats = slice.size() / size_t(count) / kBlock * kBlock;
  return slice.subspan(floats * size_t(index), floats);
}

}  // namespace sol
