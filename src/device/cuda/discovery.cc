// sol::cuda_discovery with a driver: each device's name, compute capability and sizes.
#include "device/cuda/driver.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

namespace {

CudaDiscovery discover() {
  CudaDiscovery found;
  found.built_with_cuda = true;
  const cuda::Driver* d = cuda::driver(&found.reason);
  if (!d) return found;
  found.driver_version = d->version;
  int count = 0;
  if (const CUresult r = d->cuDeviceGetCount(&count); r != CUDA_SUCCESS) {
    found.reason = "cuDeviceGetCount failed: " + cuda::error_text(r);
    return found;
  }
  if (count == 0) {
    found.reason = "the CUDA driver reports no device (CUDA_VISIBLE_DEVICES empty?)";
    return found;
  }
  for (int i = 0; i < count; ++i) {
    CUdevice dev;
    cuda::check_cu(d->cuDeviceGet(&dev, i), "cuda_discovery", "cuDeviceGet");
    CudaDeviceInfo info;
    info.index = i;
    char name[256] = {};
    cuda::check_cu(d->cuDeviceGetName(name, sizeof name - 1, dev), "cuda_discovery", "cuDeviceGetName");
    info.name = name;
    const auto attr = [&](CUdevice_attribute a) {
      int v = 0;
      cuda::check_cu(d->cuDeviceGetAttribute(&v, a, dev), "cuda_discovery", "cuDeviceGetAttribute");
      return v;
    };
    info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    info.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    info.max_shared_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    info.clock_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    info.memory_clock_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    info.memory_bus_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    size_t bytes = 0;
    cuda::check_cu(d->cuDeviceTotalMem(&bytes, dev), "cuda_discovery", "cuDeviceTotalMem");
    info.memory_bytes = int64_t(bytes);
    found.devices.push_back(info);
  }
  return found;
}

}  // namespace

const CudaDiscovery& cuda_discovery() {
  static const CudaDiscovery found = discover();
  return found;
}

}  // namespace sol
