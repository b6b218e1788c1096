#pragma once
// Timing for the device benches of scripts/device-check.sh (gpu_bench_*.cc): CUDA events on the
// device's current stream around each run, L2 flushed before every run (a memset of a buffer
// larger than L2), median of 21 after 3 warm-up runs.
#include <cuda.h>

#include <algorithm>
#include <vector>

#include "device/cuda/driver.h"
#include "sol/device.h"

namespace sol::gpu_test {

template <class F>
double median_seconds(F&& run, const DeviceBuffer& flush) {
  const Device dev = Device::cuda(0);
  const cuda::Driver& d = cuda::require_driver("bench");
  CUstream s = static_cast<CUstream>(current_stream(dev));
  std::vector<double> t;
  Event start(dev), stop(dev);
  for (int i = 0; i < 24; ++i) {
    d.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(flush.device_data()), uint8_t(i), flush.bytes(), s);
    start.record();
    run();
    stop.record();
    stop.synchronize();
    if (i >= 3) t.push_back(elapsed_seconds(start, stop));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The HBM copy ceiling for `bytes` moved (read plus written): cuMemcpyDtoD of bytes / 2, timed
// as above, in the same run as the op it pairs with.
inline double copy_ceiling_seconds(double bytes, const DeviceBuffer& flush) {
  const Device dev = Device::cuda(0);
  const cuda::Driver& d = cuda::require_driver("bench");
  CUstream s = static_cast<CUstream>(current_stream(dev));
  const size_t half = size_t(bytes / 2);
  DeviceBuffer x(dev, half), y(dev, half);
  return median_seconds(
      [&] {
        d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(y.device_data()), reinterpret_cast<CUdeviceptr>(x.device_data()),
                            half, s);
      },
      flush);
}

}  // namespace sol::gpu_test
