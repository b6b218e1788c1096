// The CLI-arguments harness links the op registry alone, not the device runtime: a `--device`
// argument naming a GPU then meets "no device" here, the same sol::Error path as on a machine
// without one, and nothing else of sol/device.h is reachable from the registry.
#include "sol/device.h"

namespace sol {

const CudaDiscovery& cuda_discovery() {
  static const CudaDiscovery none{{}, "the fuzz harness has no device runtime", 0, false};
  return none;
}

}  // namespace sol
