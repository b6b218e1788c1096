// sol/device.h in a build without the CUDA toolkit (SOL_CUDA=OFF, or AUTO with none found):
// discovery says so, host-to-host transfers still work, and anything that needs a device
// throws sol::Error with that reason.
#include <algorithm>
#include <cstring>

#include "sol/device.h"
#include "sol/error.h"

namespace sol {

namespace {

constexpr const char* kNoCuda =
    "Sol was built without CUDA (configure with -DSOL_CUDA=ON and a CUDA toolkit to use a GPU)";

[[noreturn]] void no_cuda(const char* who) { fail(who, kNoCuda); }

}  // namespace

const CudaDiscovery& cuda_discovery() {
  static const CudaDiscovery found{{}, kNoCuda, 0, false};
  return found;
}

Stream::Stream(Device) { no_cuda("Stream"); }
Stream::~Stream() = default;
Stream::Stream(Stream&& o) noexcept : device_(o.device_), handle_(o.handle_) {}
Stream& Stream::operator=(Stream&&) noexcept { return *this; }
void Stream::synchronize() const { no_cuda("Stream::synchronize"); }

void* current_stream(Device) { no_cuda("current_stream"); }
void set_current_stream(Device, void*) { no_cuda("set_current_stream"); }
void synchronize(Device) { no_cuda("synchronize"); }

Event::Event(Device) { no_cuda("Event"); }
Event::~Event() = default;
Event::Event(Event&& o) noexcept : device_(o.device_), handle_(o.handle_) {}
Event& Event::operator=(Event&&) noexcept { return *this; }
void Event::record(void*) { no_cuda("Event::record"); }
void Event::synchronize() const { no_cuda("Event::synchronize"); }
double elapsed_seconds(const Event&, const Event&) { no_cuda("elapsed_seconds"); }

DeviceBuffer::DeviceBuffer(Device, size_t) { no_cuda("DeviceBuffer"); }
DeviceBuffer::DeviceBuffer(Device, DType, std::span<const int64_t>) { no_cuda("DeviceBuffer"); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : device_(o.device_), view_(o.view_) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept { return *this; }

void transfer(const Tensor& src, const Tensor& dst) {
  if (!src.device().is_cpu() || !dst.device().is_cpu()) no_cuda("transfer");
  const bool same_shape = src.ndim() == dst.ndim() &&
                          std::equal(src.shape().begin(), src.shape().end(), dst.shape().begin());
  check(same_shape, "transfer", "src.shape = ", shape_text(src), " but dst.shape = ", shape_text(dst));
  check(src.dtype() == dst.dtype(), "transfer", "src.dtype = ", dtype_name(src.dtype()), " but dst.dtype = ",
        dtype_name(dst.dtype()));
  check(src.is_contiguous() && dst.is_contiguous(), "transfer", "src and dst must be contiguous");
  if (src.nbytes()) std::memmove(dst.data(), src.data(), size_t(src.nbytes()));
}

}  // namespace sol
