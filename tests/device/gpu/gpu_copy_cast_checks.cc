// sol::copy and sol::cast on device tensors against the CPU path, bit for bit: random inputs
// salted with every special value, poisoned outputs, odd sizes, misaligned views.
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "gpu_test.h"
#include "sol/copy.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

namespace {

// SOL_GPU_TEST_SMALL=1 (compute-sanitizer runs): only the sizes up to a few thousand elements.
bool small_only() { return std::getenv("SOL_GPU_TEST_SMALL") != nullptr; }

const DType kFloats[] = {DType::f32, DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2};

// Random bytes, with every 16th element replaced by a special code of the type (zero, inf, NaN
// with payload, largest finite, smallest subnormal, halfway cases come from the random bits).
std::vector<uint8_t> random_elements(DType t, int64_t n, uint64_t seed) {
  const size_t es = dtype_size(t);
  std::vector<uint8_t> v(size_t(n) * es);
  std::mt19937_64 rng(seed);
  for (auto& b : v) b = uint8_t(rng());
  const uint32_t f32_special[] = {0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0x7f800001u, 1u, 0x7f7fffffu,
                                  0x43e00000u /* 448 */, 0x43e80000u /* 464: e4m3 midpoint */};
  for (int64_t i = 0; i < n; i += 16) {
    const uint32_t s = f32_special[size_t(i / 16) % (sizeof f32_special / sizeof f32_special[0])];
    if (es == 4) std::memcpy(&v[size_t(i) * 4], &s, 4);
  }
  return v;
}

void check_cast(DType from, DType to, int64_t n, int64_t offset) {
  const size_t fs = dtype_size(from), ts = dtype_size(to);
  std::vector<uint8_t> in = random_elements(from, n, uint64_t(n) * 31 + size_t(from) * 7 + size_t(to));
  std::vector<uint8_t> want(size_t(n) * ts, 0xFF), got(size_t(n) * ts, 0x00);
  cast(Tensor(in.data(), from, {n}), Tensor(want.data(), to, {n}));
  DeviceBuffer dsrc(Device::cuda(0), from, {n + offset}), ddst(Device::cuda(0), to, {n + offset});
  const Tensor src = dsrc.tensor().slice(0, offset, offset + n), dst = ddst.tensor().slice(0, offset, offset + n);
  std::vector<uint8_t> poison(size_t(n) * ts, 0xFF);
  transfer(Tensor(poison.data(), to, {n}), dst);
  transfer(Tensor(in.data(), from, {n}), src);
  cast(src, dst);
  transfer(dst, Tensor(got.data(), to, {n}));
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(&want[size_t(i) * ts], &got[size_t(i) * ts], ts) != 0 && wrong++ == 0) first = i;
  SOL_EXPECT(wrong == 0, dtype_name(from), " -> ", dtype_name(to), " n = ", n, " offset ", offset, ": ", wrong,
             " elements differ from the CPU path, first at ", first);
  (void)fs;
}

}  // namespace

SOL_GPU_TEST(cast_matches_cpu_bit_for_bit) {
  for (DType from : kFloats)
    for (DType to : kFloats)
      for (int64_t n : {1, 13, 4099, 1000003})
        if (n < 5000 || !small_only()) check_cast(from, to, n, n == 4099 ? 1 : 0);
}

SOL_GPU_TEST(copy_matches_host) {
  for (DType t : {DType::f32, DType::bf16, DType::f8e4m3})
    for (int64_t n : {0, 1, 7, 4096, 1000003})
      for (int64_t offset : {0, 3}) {
        if (n >= 5000 && small_only()) continue;
        std::vector<uint8_t> in = random_elements(t, n, 99);
        std::vector<uint8_t> got(in.size(), 0xFF);
        DeviceBuffer a(Device::cuda(0), t, {n + offset}), b(Device::cuda(0), t, {n + offset});
        const Tensor src = a.tensor().slice(0, offset, offset + n), dst = b.tensor().slice(0, offset, offset + n);
        transfer(Tensor(in.data(), t, {n}), src);
        copy(src, dst);
        transfer(dst, Tensor(got.data(), t, {n}));
        SOL_EXPECT(in == got, dtype_name(t), " n = ", n, " offset ", offset);
      }
}

SOL_GPU_TEST(mixed_devices_and_bad_input_throw) {
  DeviceBuffer d(Device::cuda(0), DType::f32, {16});
  std::vector<float> h(16);
  const auto throws = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error&) {
      return true;
    }
    return false;
  };
  SOL_EXPECT(throws([&] { copy(Tensor(h.data(), DType::f32, {16}), d); }));
  SOL_EXPECT(throws([&] { cast(d, Tensor(h.data(), DType::f32, {16})); }));
  SOL_EXPECT(throws([&] { cast(d, d.tensor()); }), "overlap");
  DeviceBuffer i(Device::cuda(0), DType::i32, {16});
  SOL_EXPECT(throws([&] { cast(d, i); }), "unsupported dtype");
  SOL_EXPECT(throws([&] { (void)d.tensor().data(); }), "host access to device memory");
}

}  // namespace sol
