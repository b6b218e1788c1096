// Pinned staging for IndexReadback and IndexUpload: cuMemAllocHost costs far more than an op,
// so buffers are pooled per device for the life of the process (as the primary contexts are)
// and grow to the largest index tensor seen. Each carries the event that marks its last copy
// done; a buffer is handed out again only once that copy is (an upload returns it early).
#include "device/cuda/index_readback.h"

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "device/cuda/context.h"
#include "sol/error.h"

namespace sol::cuda {

struct PinnedStaging {
  Device device{};
  void* host = nullptr;
  size_t capacity = 0;
  CUevent copied = nullptr;
  CUevent ready = nullptr;  // a read-back's start: the op's stream has produced the indices
  bool pending = false;  // `copied` recorded after a copy that may still be running
};

namespace {

struct StagingPool {
  std::mutex mutex;
  std::vector<PinnedStaging*> free;
};

StagingPool& pool() {
  static StagingPool* p = new StagingPool;  // lives as long as the primary contexts
  return *p;
}

PinnedStaging* acquire(const Driver& d, Device device, size_t bytes, const char* op) {
  PinnedStaging* s = nullptr;
  {
    StagingPool& p = pool();
    std::lock_guard<std::mutex> lock(p.mutex);
    // The best free buffer of the device: large enough before too small (a regrowth frees
    // pinned memory, which waits for the whole context), then one whose last copy is known
    // done (a pending one, an upload's, would make this op wait for everything its stream had
    // queued before that upload; cuEventQuery says without waiting whether it is done).
    auto rank = [&](PinnedStaging* c) {
      if (c->pending && d.cuEventQuery(c->copied) == CUDA_SUCCESS) c->pending = false;
      return (c->capacity >= bytes ? 0 : 2) + (c->pending ? 1 : 0);
    };
    size_t pick = p.free.size();
    int best = 4;
    for (size_t i = 0; i < p.free.size() && best > 0; ++i)
      if (p.free[i]->device == device)
        if (const int r = rank(p.free[i]); r < best) best = r, pick = i;
    if (pick < p.free.size()) {
      s = p.free[pick];
      p.free.erase(p.free.begin() + std::ptrdiff_t(pick));
    }
  }
  if (s && s->pending) {
    if (const CUresult r = d.cuEventSynchronize(s->copied); r != CUDA_SUCCESS) {
      std::lock_guard<std::mutex> lock(pool().mutex);
      pool().free.push_back(s);
      check_cu(r, op, "cuEventSynchronize (pinned staging)");
    }
    s->pending = false;
  }
  if (!s) {
    s = new PinnedStaging;
    s->device = device;
    CUresult r = d.cuEventCreate(&s->copied, CU_EVENT_DISABLE_TIMING);
    if (r == CUDA_SUCCESS) r = d.cuEventCreate(&s->ready, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
      if (s->copied) d.cuEventDestroy(s->copied);
      delete s;
      check_cu(r, op, "cuEventCreate");
    }
  }
  if (s->capacity < bytes) {
    if (s->host) d.cuMemFreeHost(s->host);
    s->host = nullptr;
    s->capacity = 0;
    if (const CUresult r = d.cuMemAllocHost(&s->host, bytes); r != CUDA_SUCCESS) {
      std::lock_guard<std::mutex> lock(pool().mutex);
      pool().free.push_back(s);
      check_cu(r, op, "cuMemAllocHost");
    }
    s->capacity = bytes;
  }
  return s;
}

void release(PinnedStaging* s) {
  std::lock_guard<std::mutex> lock(pool().mutex);
  pool().free.push_back(s);
}

// The stream a read-back copies on, beside the op's stream: a read-back waits for the op's
// stream to reach it, then copies while the op's kernel runs, so the kernel does not queue
// behind the copy. A few per device, an op stream mapped to one by its handle: read-backs of
// different streams then rarely queue behind each other (a shared one queued a read-back for
// stream B behind one still waiting for stream A, and two host threads whose streams wait on
// each other's later work could wait for ever), and the count stays bounded however many
// streams a program makes and destroys. Threads on the per-thread default stream share a handle.
constexpr int kSideStreams = 8;
CUstream readback_stream(const Driver& d, Device device, void* op_stream, const char* op) {
  static std::mutex mutex;
  static auto* streams = new std::map<int, std::array<CUstream, kSideStreams>>;  // as long as the contexts
  const auto h = reinterpret_cast<uintptr_t>(op_stream);
  const int slot = int((h ^ (h >> 7) ^ (h >> 17)) % kSideStreams);
  std::lock_guard<std::mutex> lock(mutex);
  CUstream& s = (*streams)[device.index][size_t(slot)];
  if (!s) check_cu(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), op, "cuStreamCreate (index read-back)");
  return s;
}

}  // namespace

IndexReadback::IndexReadback(const char* op, const Tensor& indices, void* stream) : op_(op) {
  check(indices.is_contiguous(), op, "index tensor ", describe_text(indices), " must be contiguous");
  const Driver& d = use_device(indices.device(), op);
  const size_t bytes = size_t(indices.nbytes());
  CUstream side = readback_stream(d, indices.device(), stream, op);
  staging_ = acquire(d, indices.device(), bytes ? bytes : 1, op);
  CUresult r = d.cuEventRecord(staging_->ready, static_cast<CUstream>(stream));
  if (r == CUDA_SUCCESS) r = d.cuStreamWaitEvent(side, staging_->ready, 0);
  if (r != CUDA_SUCCESS) {
    release(staging_);  // nothing was enqueued into it
    staging_ = nullptr;
    check_cu(r, op, "index read-back");
  }
  if (bytes)
    r = d.cuMemcpyDtoHAsync(staging_->host, reinterpret_cast<CUdeviceptr>(indices.device_data()), bytes, side);
  if (r == CUDA_SUCCESS) r = d.cuEventRecord(staging_->copied, side);
  if (r != CUDA_SUCCESS) {
    staging_ = nullptr;  // a copy may have been enqueued into it: leaked, never handed out again
    check_cu(r, op, "index read-back");
  }
}

IndexReadback::~IndexReadback() {
  if (!staging_) return;
  // A destructor must not throw: a failing wait (device lost) leaks the buffer, which the DMA
  // might still write.
  if (!waited_) {
    const Driver* d = driver();
    if (!d || d->cuEventSynchronize(staging_->copied) != CUDA_SUCCESS) return;
  }
  release(staging_);
}

IndexUpload::IndexUpload(const char* op, Device device, size_t bytes) : op_(op) {
  staging_ = acquire(use_device(device, op), device, bytes ? bytes : 1, op);
}

IndexUpload::~IndexUpload() {
  if (staging_) release(staging_);
}

void* IndexUpload::host() const { return staging_->host; }

void IndexUpload::upload(const Tensor& dst, void* stream) {
  check(dst.is_contiguous() && size_t(dst.nbytes()) <= staging_->capacity, op_, "upload of ",
        describe_text(dst), " from ", staging_->capacity, " staged bytes");
  const Driver& d = use_device(dst.device(), op_);
  CUstream s = static_cast<CUstream>(stream);
  if (dst.nbytes())
    check_cu(d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst.device_data()), staging_->host,
                                 size_t(dst.nbytes()), s),
             op_, "cuMemcpyHtoDAsync (index upload)");
  if (const CUresult r = d.cuEventRecord(staging_->copied, s); r != CUDA_SUCCESS) {
    staging_ = nullptr;  // the copy may still read it: leaked, never handed out again
    check_cu(r, op_, "cuEventRecord (index upload)");
  }
  staging_->pending = true;
  release(staging_);
  staging_ = nullptr;
}

const void* IndexReadback::wait() {
  if (!waited_) {
    check_cu(require_driver(op_).cuEventSynchronize(staging_->copied), op_, "cuEventSynchronize (index read-back)");
    waited_ = true;
  }
  return staging_->host;
}

}  // namespace sol::cuda
