#include "gemm_case.h"

#include <cmath>

#include "sol/error.h"

namespace sol_bench {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fill_uniform(const sol::Buffer& buf, uint64_t seed) {
  const sol::Tensor& t = buf.tensor();
  const int64_t n = t.numel();
  uint64_t state = seed;
  for (int64_t i = 0; i < n; ++i) {
    const float x = float(int64_t(splitmix64(state) >> 40) - (int64_t(1) << 23)) * (1.0f / float(1 << 23));
    if (t.dtype() == sol::DType::f32) t.data_as<float>()[i] = x;
    else if (t.dtype() == sol::DType::bf16) t.data_as<uint16_t>()[i] = sol::f32_to_bf16(x);
    else if (t.dtype() == sol::DType::i8) t.data_as<int8_t>()[i] = int8_t(std::lround(x * 127.0f));
    else sol::fail("gemm_anchors", "no fill for dtype ", sol::dtype_name(t.dtype()));
  }
}

double value_at(const sol::Tensor& t, int64_t r, int64_t c) {
  const char* row = static_cast<const char*>(t.data()) + r * t.stride(0) * int64_t(sol::dtype_size(t.dtype()));
  if (t.dtype() == sol::DType::f32) return reinterpret_cast<const float*>(row)[c];
  if (t.dtype() == sol::DType::bf16) return sol::bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[c]);
  if (t.dtype() == sol::DType::i32) return reinterpret_cast<const int32_t*>(row)[c];
  sol::fail("gemm_anchors", "no comparison for dtype ", sol::dtype_name(t.dtype()));
}

}  // namespace

double GemmCase::bytes() const {
  const double in_size = double(sol::dtype_size(in)), out_size = double(sol::dtype_size(out));
  double total = 0;
  for (int g = 0; g < groups(); ++g) {
    if (m(g) == 0) continue;
    const double mg = double(m(g)), n = double(shape.n), k = double(shape.k);
    total += (mg * k + k * n) * in_size + mg * n * out_size;
  }
  return total;
}

GemmCase make_case(const GemmShape& shape, sol::DType in, sol::DType out, int64_t cold_bytes) {
  GemmCase c;
  c.shape = shape;
  c.in = in;
  c.out = out;
  const double set_bytes = c.bytes();
  // As sol bench: sets whose sum outgrows `cold_bytes` when one set is smaller than it.
  c.sets = set_bytes <= 0 || cold_bytes <= 0 || set_bytes >= double(cold_bytes)
               ? 1
               : int(std::min(4096.0, std::ceil(double(cold_bytes) / set_bytes)));
  const bool nt = shape.layout == sol::Layout::nt;
  c.a.resize(size_t(c.sets));
  c.b.resize(size_t(c.sets));
  for (int s = 0; s < c.sets; ++s) {
    for (int g = 0; g < c.groups(); ++g) {
      if (c.m(g) == 0) {
        c.a[size_t(s)].emplace_back();
        c.b[size_t(s)].emplace_back();
        continue;
      }
      c.a[size_t(s)].emplace_back(in, std::initializer_list<int64_t>{c.m(g), shape.k});
      c.b[size_t(s)].emplace_back(in, nt ? std::initializer_list<int64_t>{shape.n, shape.k}
                                         : std::initializer_list<int64_t>{shape.k, shape.n});
      const uint64_t seed = 1000003ull * uint64_t(s) + 1009ull * uint64_t(g);
      fill_uniform(c.a[size_t(s)].back(), seed + 1);
      fill_uniform(c.b[size_t(s)].back(), seed + 2);
    }
  }
  return c;
}

double relative_error(const GemmRunner& x, const GemmRunner& y, const GemmCase& c) {
  double diff = 0, ref = 0;
  for (int g = 0; g < c.groups(); ++g) {
    if (c.m(g) == 0) continue;
    const sol::Tensor tx = x.output(g), ty = y.output(g);
    for (int64_t r = 0; r < c.m(g); ++r)
      for (int64_t j = 0; j < c.shape.n; ++j) {
        const double vx = value_at(tx, r, j), vy = value_at(ty, r, j);
        diff += (vx - vy) * (vx - vy);
        ref += vy * vy;
      }
  }
  if (std::isnan(diff)) return diff;
  return ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
}

}  // namespace sol_bench
