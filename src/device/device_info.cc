// The parts of sol/device.h that hold with or without a CUDA toolkit.
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

std::string CudaDeviceInfo::arch() const {
  // Hopper and Blackwell kernels use the architecture-specific ('a') features.
  const std::string base = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  return cc_major >= 9 ? base + "a" : base;
}

int cuda_device_count() { return int(cuda_discovery().devices.size()); }

const CudaDeviceInfo& cuda_device(int index) {
  const CudaDiscovery& found = cuda_discovery();
  check(!found.devices.empty(), "cuda_device", "no CUDA device: ", found.reason);
  check(index >= 0 && index < int(found.devices.size()), "cuda_device", "cuda:", index,
        " does not exist (", found.devices.size(), " CUDA device(s))");
  return found.devices[size_t(index)];
}

}  // namespace sol
