// Streams and events on a device's primary context.
#include <mutex>
#include <unordered_map>
#include <utility>

#include "device/cuda/context.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

namespace {

struct CurrentStreams {
  std::mutex mutex;
  std::unordered_map<int, CUstream> own;  // Sol's stream per device, created on first use
  std::unordered_map<int, CUstream> set;  // set_current_stream's choice
};

CurrentStreams& streams() {
  static CurrentStreams* s = new CurrentStreams;  // lives as long as the primary contexts
  return *s;
}

}  // namespace

Stream::Stream(Device device) : device_(device) {
  const cuda::Driver& d = cuda::use_device(device, "Stream");
  CUstream s;
  cuda::check_cu(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "Stream", "cuStreamCreate");
  handle_ = s;
}

Stream::~Stream() {
  if (handle_) cuda::require_driver("Stream").cuStreamDestroy(static_cast<CUstream>(handle_));
}

Stream::Stream(Stream&& o) noexcept : device_(o.device_), handle_(std::exchange(o.handle_, nullptr)) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  std::swap(device_, o.device_);
  std::swap(handle_, o.handle_);
  return *this;
}

void Stream::synchronize() const {
  const cuda::Driver& d = cuda::use_device(device_, "Stream::synchronize");
  cuda::check_cu(d.cuStreamSynchronize(static_cast<CUstream>(handle_)), "Stream::synchronize",
                 "cuStreamSynchronize");
}

void* current_stream(Device device) {
  const cuda::Driver& d = cuda::use_device(device, "current_stream");
  CurrentStreams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (auto it = s.set.find(device.index); it != s.set.end()) return it->second;
  CUstream& own = s.own[device.index];
  if (!own) cuda::check_cu(d.cuStreamCreate(&own, CU_STREAM_NON_BLOCKING), "current_stream", "cuStreamCreate");
  return own;
}

void set_current_stream(Device device, void* stream) {
  cuda::use_device(device, "set_current_stream");
  CurrentStreams& s = streams();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (stream) s.set[device.index] = static_cast<CUstream>(stream);
  else s.set.erase(device.index);
}

void synchronize(Device device) {
  void* s = current_stream(device);
  cuda::check_cu(cuda::require_driver("synchronize").cuStreamSynchronize(static_cast<CUstream>(s)),
                 "synchronize", "cuStreamSynchronize");
}

Event::Event(Device device) : device_(device) {
  const cuda::Driver& d = cuda::use_device(device, "Event");
  CUevent e;
  cuda::check_cu(d.cuEventCreate(&e, CU_EVENT_DEFAULT), "Event", "cuEventCreate");
  handle_ = e;
}

Event::~Event() {
  if (handle_) cuda::require_driver("Event").cuEventDestroy(static_cast<CUevent>(handle_));
}

Event::Event(Event&& o) noexcept : device_(o.device_), handle_(std::exchange(o.handle_, nullptr)) {}

Event& Event::operator=(Event&& o) noexcept {
  std::swap(device_, o.device_);
  std::swap(handle_, o.handle_);
  return *this;
}

void Event::record(void* stream) {
  const cuda::Driver& d = cuda::use_device(device_, "Event::record");
  cuda::check_cu(d.cuEventRecord(static_cast<CUevent>(handle_), static_cast<CUstream>(stream)),
                 "Event::record", "cuEventRecord");
}

void Event::synchronize() const {
  const cuda::Driver& d = cuda::use_device(device_, "Event::synchronize");
  cuda::check_cu(d.cuEventSynchronize(static_cast<CUevent>(handle_)), "Event::synchronize", "cuEventSynchronize");
}

double elapsed_seconds(const Event& start, const Event& stop) {
  check(start.device() == stop.device(), "elapsed_seconds", "start is on ", start.device(), " but stop is on ",
        stop.device());
  const cuda::Driver& d = cuda::use_device(start.device(), "elapsed_seconds");
  float ms = 0;
  cuda::check_cu(d.cuEventElapsedTime(&ms, static_cast<CUevent>(start.handle()), static_cast<CUevent>(stop.handle())),
                 "elapsed_seconds", "cuEventElapsedTime");
  return double(ms) * 1e-3;
}

}  // namespace sol
