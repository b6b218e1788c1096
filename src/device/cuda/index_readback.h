#pragma once
// Index data moved between device and host through pooled pinned memory, with no
// synchronisation on the way beyond the one the op needs.
// IndexReadback: index data an op range-checks on the host (rope's positions, embedding's ids,
// unpermute's row_of). The copy into pinned memory goes on a stream of its own once the op's
// stream reaches this point, the op's kernel is enqueued on the op's stream without waiting
// for it (the kernel never follows an index out of range: it skips that row), and only then
// does the host wait, for the copy alone. Copy and kernel run side by side while the host waits
// and checks; an out-of-range index is still a sol::Error from the op's own call (docs/gpu.md,
// "Index data").
#include "sol/tensor.h"

namespace sol::cuda {

struct PinnedStaging;

class IndexReadback {
 public:
  // Enqueues the copy of `indices` (contiguous, on a CUDA device) to follow what is enqueued on
  // `stream` (one of that device's CUstreams) so far. `op` names the caller in errors.
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

// Index data the host computes for a kernel (moe_permute's plan), uploaded without a
// synchronisation: the host fills pinned memory, upload() enqueues the copy on the stream,
// and the buffer goes back to the pool marked busy until that copy is done.
class IndexUpload {
 public:
  // Pinned host memory for `bytes` on `device`.
  IndexUpload(const char* op, Device device, size_t bytes);
  ~IndexUpload();  // returns the buffer to the pool if upload() was not called
  IndexUpload(const IndexUpload&) = delete;
  IndexUpload& operator=(const IndexUpload&) = delete;

  void* host() const;
  // Enqueues the copy of the first dst.nbytes() bytes into `dst` (contiguous, on the device) on
  // `stream`; the host buffer is not to be touched afterwards.
  void upload(const Tensor& dst, void* stream);

 private:
  const char* op_;
  PinnedStaging* staging_ = nullptr;
};

}  // namespace sol::cuda
