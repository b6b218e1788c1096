#pragma once
// The memory the DRAM and L2 ceilings stream through: one region far larger than the
// last-level cache, created on first use and kept for the life of the process, so a quick
// paired re-measurement next to a benchmarked op pays no allocation or page faults.
#include <cstddef>
#include <span>

#include "sol/tensor.h"

namespace sol {

class StreamArena {
 public:
  // Created on first call (about 0.1-0.3 s): max(512 MiB, 4 x L3), capped at a quarter of
  // physical memory, each thread's share first touched by that thread.
  static const StreamArena& get();
  // Thread `thread`'s share when `threads` threads stream: contiguous, disjoint, 4 KiB aligned.
  std::span<float> slice(int thread, int threads) const;
  size_t bytes() const { return buffer_.bytes(); }

 private:
  StreamArena();
  Buffer buffer_;
};

// Array `index` of `count` equal arrays carved from `slice`: 64-byte aligned, a multiple of
// the streaming loops' block, so every loop can run without a remainder.
std::span<float> split(std::span<float> slice, int index, int count);

}  // namespace sol
