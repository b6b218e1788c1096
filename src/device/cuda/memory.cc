// Device allocations and copies between host and device.
#include <cstring>
#include <utility>

#include "device/cuda/context.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

namespace {

CUdeviceptr address(const Tensor& t) { return reinterpret_cast<CUdeviceptr>(t.device_data()); }

}  // namespace

DeviceBuffer::DeviceBuffer(Device device, size_t bytes) : device_(device), bytes_(bytes) {
  if (device.is_cpu()) fail("DeviceBuffer", "device is cpu (use sol::Buffer for host memory)");
  const cuda::Driver& d = cuda::use_device(device, "DeviceBuffer");
  if (bytes) {
    CUdeviceptr p = 0;
    if (const CUresult r = d.cuMemAlloc(&p, bytes); r != CUDA_SUCCESS)
      fail("DeviceBuffer", "cuMemAlloc of ", bytes, " bytes on ", device, " failed: ", cuda::error_text(r));
    data_ = reinterpret_cast<void*>(p);
  }
  const int64_t n = int64_t(bytes);
  view_ = Tensor(data_, DType::u8, {n}).on(device);
}

DeviceBuffer::DeviceBuffer(Device device, DType dtype, std::span<const int64_t> shape)
    : DeviceBuffer(device, size_t(Tensor(nullptr, dtype, shape).nbytes())) {
  view_ = Tensor(data_, dtype, shape).on(device);
}

DeviceBuffer::~DeviceBuffer() {
  if (!data_) return;
  // A destructor must not throw: a failing cuMemFree (device lost) leaks the allocation.
  const cuda::Driver* d = cuda::driver();
  if (d && d->cuCtxSetCurrent) {
    try {
      cuda::use_device(device_, "DeviceBuffer");
      d->cuMemFree(reinterpret_cast<CUdeviceptr>(data_));
    } catch (const Error&) {
    }
  }
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : device_(o.device_), data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)),
      view_(std::exchange(o.view_, Tensor())) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(device_, o.device_);
  std::swap(data_, o.data_);
  std::swap(bytes_, o.bytes_);
  std::swap(view_, o.view_);
  return *this;
}

void transfer(const Tensor& src, const Tensor& dst) {
  const bool same_shape = src.ndim() == dst.ndim() &&
                          std::equal(src.shape().begin(), src.shape().end(), dst.shape().begin());
  check(same_shape, "transfer", "src.shape = ", shape_text(src), " but dst.shape = ", shape_text(dst));
  check(src.dtype() == dst.dtype(), "transfer", "src.dtype = ", dtype_name(src.dtype()), " but dst.dtype = ",
        dtype_name(dst.dtype()));
  check(src.is_contiguous(), "transfer", "src ", describe_text(src), " must be contiguous");
  check(dst.is_contiguous(), "transfer", "dst ", describe_text(dst), " must be contiguous");
  const size_t bytes = size_t(src.nbytes());
  if (bytes == 0) return;
  check(src.device_data() && dst.device_data(), "transfer", "src or dst has elements but no data");
  const Device from = src.device(), to = dst.device();
  if (from.is_cpu() && to.is_cpu()) {
    std::memmove(dst.data(), src.data(), bytes);
    return;
  }
  // Every copy is ordered on the device's current stream and waited for: the op that produced
  // src (or will read dst) runs on that stream, and a pageable host copy may otherwise return
  // before its DMA has finished.
  check(from.is_cpu() || to.is_cpu() || from == to, "transfer", "src is on ", from, " and dst on ", to,
        ": copies between two devices are not supported yet (go through the host)");
  const Device device = from.is_cpu() ? to : from;
  const cuda::Driver& d = cuda::use_device(device, "transfer");
  CUstream s = static_cast<CUstream>(current_stream(device));
  if (from.is_cpu())
    cuda::check_cu(d.cuMemcpyHtoDAsync(address(dst), src.data(), bytes, s), "transfer", "cuMemcpyHtoDAsync");
  else if (to.is_cpu())
    cuda::check_cu(d.cuMemcpyDtoHAsync(dst.data(), address(src), bytes, s), "transfer", "cuMemcpyDtoHAsync");
  else
    cuda::check_cu(d.cuMemcpyDtoDAsync(address(dst), address(src), bytes, s), "transfer", "cuMemcpyDtoDAsync");
  cuda::check_cu(d.cuStreamSynchronize(s), "transfer", "cuStreamSynchronize");
}

}  // namespace sol
