#pragma once
// Index data an op range-checks on the host (rope's positions, embedding's ids, unpermute's
// row_of), read back without stalling the device: the copy into pinned host memory is enqueued
// on the op's stream, the op's kernel right behind it (the kernel itself never follows an index
// out of range: it skips that row), and only then does the host wait, for the copy alone. The
// kernel runs while the host waits and checks, and an out-of-range index is still a sol::Error
// from the op's own call (docs/gpu.md, "Index data").
#include "sol/tensor.h"

namespace sol::cuda {

struct PinnedStaging;

class IndexReadback {
 public:
  // Enqueues the copy of `indices` (contiguous, on a CUDA device) on `stream`, one of that
  // device's CUstreams. `op` names the caller in errors.
  IndexReadback(const char* op, const Tensor& indices, void* stream);
  // Waits for the copy if wait() has not (the pinned buffer goes back to a pool for reuse).
  ~IndexReadback();
  IndexReadback(const IndexReadback&) = delete;
  IndexReadback& operator=(const IndexReadback&) = delete;

  // Waits for the copy, not for anything enqueued after it; the host copy of the indices.
  const void* wait();

 private:
  const char* op_;
  PinnedStaging* staging_ = nullptr;
  bool waited_ = false;
};

}  // namespace sol::cuda
