#include "device/cuda/context.h"

#include <memory>
#include <mutex>
#include <vector>

#include "sol/device.h"
#include "sol/error.h"

namespace sol::cuda {

namespace {

struct Contexts {
  std::mutex mutex;
  std::vector<CUcontext> primary;  // by device index; nullptr until retained
};

Contexts& contexts() {
  static Contexts* c = new Contexts;  // never destroyed: see context.h
  return *c;
}

}  // namespace

const Driver& use_device(Device device, const char* who) {
  check(device.type == DeviceType::cuda, who, "device ", device, " is not a CUDA device");
  const CudaDiscovery& found = cuda_discovery();
  check(device.index >= 0 && device.index < int(found.devices.size()), who, "device ", device,
        " does not exist: ",
        found.devices.empty() ? found.reason : std::to_string(found.devices.size()) + " CUDA device(s)");
  const Driver& d = require_driver(who);
  Contexts& c = contexts();
  CUcontext ctx;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.primary.size() < found.devices.size()) c.primary.resize(found.devices.size(), nullptr);
    CUcontext& slot = c.primary[size_t(device.index)];
    if (!slot) {
      CUdevice dev;
      check_cu(d.cuDeviceGet(&dev, device.index), who, "cuDeviceGet");
      check_cu(d.cuDevicePrimaryCtxRetain(&slot, dev), who, "cuDevicePrimaryCtxRetain");
    }
    ctx = slot;
  }
  check_cu(d.cuCtxSetCurrent(ctx), who, "cuCtxSetCurrent");
  return d;
}

}  // namespace sol::cuda
