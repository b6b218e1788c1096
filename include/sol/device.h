#pragma once
// Accelerators: which CUDA devices this process can use (and why none, when none), streams,
// events, device memory and copies between host and device. A device tensor is an ordinary
// sol::Tensor whose device() is cuda:N; ops route it to their CUDA path, and CPU-only ops
// reject it with sol::Error before touching its memory.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "sol/tensor.h"

namespace sol {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;          // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t memory_bytes = 0;
  int64_t l2_bytes = 0;
  int max_shared_per_block = 0;  // opt-in maximum of dynamic shared memory, bytes
  int clock_khz = 0;             // SM clock
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
  // The NVRTC/nvcc target: "sm_90a" on Hopper (the 'a' features: wgmma, setmaxnreg).
  std::string arch() const;
};

struct CudaDiscovery {
  std::vector<CudaDeviceInfo> devices;
  // Why there is no device ("" when there is one): Sol built without CUDA, no libcuda.so.1,
  // cuInit's error name and text, or zero devices.
  std::string reason;
  int driver_version = 0;  // 13000 = 13.0; 0 without a driver
  bool built_with_cuda = false;  // the CUDA backend is in this build (SOL_CUDA)
};

// Looked up once per process.
const CudaDiscovery& cuda_discovery();
int cuda_device_count();
// The info of cuda:index, or sol::Error with discovery's reason.
const CudaDeviceInfo& cuda_device(int index);

// An owned CUDA stream on one device (created non-blocking). handle() is the CUstream.
class Stream {
 public:
  explicit Stream(Device device);
  ~Stream();
  Stream(Stream&& o) noexcept;
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device device() const { return device_; }
  void* handle() const { return handle_; }
  void synchronize() const;

 private:
  Device device_{};
  void* handle_ = nullptr;
};

// The stream Sol's ops on `device` enqueue on: Sol's own stream for the device, or the one
// given to set_current_stream (a framework's, e.g. torch.cuda.current_stream().cuda_stream).
// Ops are asynchronous on it, as CUDA kernels are.
void* current_stream(Device device);
void set_current_stream(Device device, void* stream);  // nullptr: back to Sol's own
// Waits for everything enqueued on the device's current stream.
void synchronize(Device device);

// A CUDA event (with timing) on one device.
class Event {
 public:
  explicit Event(Device device);
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(void* stream);  // a CUstream of the event's device
  void record() { record(current_stream(device_)); }
  void synchronize() const;
  Device device() const { return device_; }
  void* handle() const { return handle_; }  // the CUevent

 private:
  Device device_{};
  void* handle_ = nullptr;
};
// Seconds between two recorded and completed events.
double elapsed_seconds(const Event& start, const Event& stop);

// Owning device allocation (256-byte aligned, as cuMemAlloc gives), with a contiguous view.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device device, size_t bytes);
  DeviceBuffer(Device device, DType dtype, std::span<const int64_t> shape);
  DeviceBuffer(Device device, DType dtype, std::initializer_list<int64_t> shape)
      : DeviceBuffer(device, dtype, std::span<const int64_t>(shape.begin(), shape.size())) {}
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  Device device() const { return device_; }
  void* device_data() const { return data_; }
  size_t bytes() const { return bytes_; }
  const Tensor& tensor() const { return view_; }
  operator const Tensor&() const { return view_; }

 private:
  Device device_{};
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Tensor view_;
};

// dst = src between any two devices (host -> device, device -> host, device -> device, host ->
// host): same shape and dtype, both contiguous. Returns when dst holds the data (a device ->
// device copy is ordered on the current stream and waited for).
void transfer(const Tensor& src, const Tensor& dst);

}  // namespace sol
