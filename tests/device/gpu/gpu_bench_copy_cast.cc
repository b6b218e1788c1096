// Device timings of copy and cast for scripts/device-check.sh (not a test: run by name,
// `sol_gpu_tests bench_copy_cast`, never by ctest). Each case is timed as gpu_bench.h says (a
// 256 MiB L2 flush before every run) and paired with the HBM copy ceiling measured right beside
// it (cuMemcpyDtoD over the same bytes). One JSON line per case. Inputs are standard normal values
// (as scripts/device-check-torch.py's torch.randn(...).to(dtype)), rounded to the source dtype by
// Sol's host cast: a cast's cost can depend on its values (bf16/f32 -> e4m3 takes a slower branch
// for values below e4m3's normal range, which half of all random bit patterns would be), so both
// sides time the same kind of data.
#include <algorithm>
#include <cuda.h>
#include <random>
#include <vector>

#include "device/cuda/driver.h"
#include "gpu_bench.h"
#include "gpu_test.h"
#include "sol/copy.h"
#include "sol/device.h"

namespace sol {

using gpu_test::median_seconds;

SOL_GPU_TEST(bench_copy_cast) {
  const Device dev = Device::cuda(0);
  const int64_t rows = 4096, cols = 7168, n = rows * cols;
  DeviceBuffer flush(dev, size_t(256) << 20);
  const cuda::Driver& d = cuda::require_driver("bench");
  struct Case {
    DType from, to;
  };
  // N(0, 1), made once: the same inputs for every case.
  Buffer normal(DType::f32, {rows, cols});
  {
    std::mt19937_64 gen(0x5eed);
    std::normal_distribution<float> dist;
    float* p = normal.tensor().data_as<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = dist(gen);
  }
  for (const Case c : {Case{DType::bf16, DType::bf16}, Case{DType::f32, DType::f32}, Case{DType::f32, DType::bf16},
                       Case{DType::bf16, DType::f32}, Case{DType::bf16, DType::f8e4m3}, Case{DType::f32, DType::f8e4m3},
                       Case{DType::f8e4m3, DType::bf16}}) {
    DeviceBuffer a(dev, c.from, {rows, cols}), b(dev, c.to, {rows, cols});
    if (c.from == DType::f32) {
      transfer(normal, a);
    } else {
      Buffer init(c.from, {rows, cols});
      cast(normal, init);
      transfer(init, a);
    }
    const double bytes = double(a.bytes() + b.bytes());
    const bool is_copy = c.from == c.to;
    const double op = median_seconds([&] { is_copy ? copy(a, b) : cast(a, b); }, flush);
    CUstream s = static_cast<CUstream>(current_stream(dev));
    const size_t half = size_t(bytes / 2);
    DeviceBuffer x(dev, half), y(dev, half);
    const double ceiling = median_seconds(
        [&] {
          d.cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(y.device_data()),
                              reinterpret_cast<CUdeviceptr>(x.device_data()), half, s);
        },
        flush);
    const double gbps = bytes / op / 1e9, ceiling_gbps = bytes / ceiling / 1e9;
    std::printf("BENCH {\"op\": \"%s\", \"shape\": \"%lldx%lld\", \"from\": \"%s\", \"to\": \"%s\", \"time_s\": %.9g, "
                "\"bytes\": %.0f, \"gbps\": %.1f, \"ceiling\": \"hbm_copy (cuMemcpyDtoD, same bytes, same run)\", "
                "\"ceiling_gbps\": %.1f, \"sol_pct\": %.1f}\n",
                is_copy ? "copy" : "cast", (long long)rows, (long long)cols, std::string(dtype_name(c.from)).c_str(),
                std::string(dtype_name(c.to)).c_str(), op, bytes, gbps, ceiling_gbps, 100.0 * gbps / ceiling_gbps);
  }
}

}  // namespace sol
