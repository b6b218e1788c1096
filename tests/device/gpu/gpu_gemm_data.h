#pragma once
// Host data for the GEMM gpu tests and benches: random values rounded as the CPU path rounds
// them (bf16 and fp8 through sol::cast), and their upload.
#include <cstdint>

#include "sol/copy.h"
#include "sol/device.h"
#include "sol/tensor.h"

namespace sol::gpu_test {

// [rows, cols] of `dtype`, values uniform in [low, high) from a fixed seed.
inline Buffer random_host(DType dtype, int64_t rows, int64_t cols, uint64_t seed, float low = -1.f,
                          float high = 1.f) {
  Buffer f(DType::f32, {rows, cols}), out(dtype, {rows, cols});
  float* p = f.tensor().data_as<float>();
  for (int64_t i = 0; i < rows * cols; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    p[i] = low + (high - low) * float(seed >> 40) / float(1 << 24);
  }
  if (dtype == DType::f32) return f;
  cast(f, out);
  return out;
}

inline void fill(const Buffer& f32, float value) {
  float* p = f32.tensor().data_as<float>();
  for (int64_t i = 0; i < f32.tensor().numel(); ++i) p[i] = value;
}

inline DeviceBuffer upload(const Buffer& host, Device device = Device::cuda(0)) {
  const Tensor& t = host.tensor();
  DeviceBuffer d(device, t.dtype(), t.shape());
  transfer(t, d);
  return d;
}

inline DeviceBuffer upload_scalar(float value, Device device = Device::cuda(0)) {
  DeviceBuffer d(device, DType::f32, {1, 1});
  transfer(Tensor(&value, DType::f32, {1, 1}), d);
  return d;
}

}  // namespace sol::gpu_test
