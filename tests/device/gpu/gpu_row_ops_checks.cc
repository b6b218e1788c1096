// The row ops' CUDA entries (rmsnorm, add_rmsnorm, rmsnorm_quant_fp8, quant_fp8_per_token /
// per_block, silu_mul, gelu and their fused quantization) against the CPU path on random data:
// outputs poisoned first (0xFF), odd shapes (1 row, prime hidden sizes, sizes that are no
// multiple of a vector), views at an element offset (the kernels' per-element path), NaN and
// infinities. Norm and quantization outputs must be the CPU's bit for bit (NaN payloads aside);
// activations within the API's tolerance, and their fused quantization bit for bit the device's
// own composition.
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_test.h"
#include "sol/activation.h"
#include "sol/device.h"
#include "sol/norm.h"
#include "sol/quant.h"

namespace sol {

namespace {

bool small_only() { return std::getenv("SOL_GPU_TEST_SMALL") != nullptr; }

// A host matrix of `t` with random values over several binades; `specials`: a +NaN in row 0
// and +-inf in the last row (positive NaN: the CPU paths agree on its codes).
struct HostMatrix {
  DType t;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  Tensor tensor() { return Tensor(bytes.data(), t, {rows, cols}); }
};

HostMatrix random_matrix(DType t, int64_t rows, int64_t cols, uint64_t seed, bool specials = false) {
  HostMatrix m{t, rows, cols, std::vector<uint8_t>(size_t(rows * cols) * dtype_size(t))};
  std::mt19937_64 rng{seed};
  for (int64_t i = 0; i < rows * cols; ++i) {
    float v = std::ldexp(float(int(rng() % 20001) - 10000) / 10000, int(rng() % 10) - 4);
    if (specials && i == cols / 2) v = std::bit_cast<float>(0x7fc00000u);
    if (specials && rows > 1 && i == (rows - 1) * cols + 1) v = INFINITY;
    if (specials && rows > 1 && i == (rows - 1) * cols + 2) v = -INFINITY;
    if (t == DType::bf16) {
      const uint16_t b = f32_to_bf16(v);
      std::memcpy(&m.bytes[size_t(i) * 2], &b, 2);
    } else {
      std::memcpy(&m.bytes[size_t(i) * 4], &v, 4);
    }
  }
  return m;
}

// A device copy of a host matrix as a view `offset` elements into its buffer (offset 1: not
// 16-byte aligned, the kernels' per-element path).
struct DeviceMatrix {
  DeviceBuffer buffer;
  Tensor view;
};
DeviceMatrix to_device(const Tensor& host, int64_t offset) {
  const int64_t n = host.numel();
  DeviceMatrix d{DeviceBuffer(Device::cuda(0), host.dtype(), {n + offset}), {}};
  d.view = d.buffer.tensor().slice(0, offset, offset + n).reshape(host.shape());
  transfer(host.reshape({n}), d.buffer.tensor().slice(0, offset, offset + n));
  return d;
}
DeviceMatrix poisoned(DType t, std::vector<int64_t> shape, int64_t offset) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<uint8_t> poison(size_t(n) * dtype_size(t), 0xFF);
  const Tensor host(poison.data(), t, shape);
  return to_device(host, offset);
}
std::vector<uint8_t> to_host(const Tensor& d) {
  std::vector<uint8_t> out(size_t(d.numel()) * dtype_size(d.dtype()));
  transfer(d.reshape({d.numel()}), Tensor(out.data(), d.dtype(), {d.numel()}));
  return out;
}

float element(const std::vector<uint8_t>& b, DType t, size_t i) {
  if (t == DType::bf16) {
    uint16_t v;
    std::memcpy(&v, &b[i * 2], 2);
    return bf16_to_f32(v);
  }
  if (t == DType::f8e4m3) return e4m3_to_f32(b[i]);
  float v;
  std::memcpy(&v, &b[i * 4], 4);
  return v;
}

// Bit for bit, where both are NaN only NaN-ness (payloads are not promised). Returns the count
// of differing elements.
int64_t count_differences(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, DType t) {
  const size_t es = dtype_size(t), n = want.size() / es;
  int64_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&got[i * es], &want[i * es], es) == 0) continue;
    if (t != DType::f8e4m3 && std::isnan(element(got, t, i)) && std::isnan(element(want, t, i))) continue;
    ++wrong;
  }
  return wrong;
}

// Within `ulps` bf16 steps (bf16) or a relative 1e-5 of the row's scale (f32); NaN where NaN.
int64_t count_far(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, DType t, int ulps) {
  const size_t n = want.size() / dtype_size(t);
  int64_t far = 0;
  for (size_t i = 0; i < n; ++i) {
    const float a = element(got, t, i), b = element(want, t, i);
    if (std::isnan(a) || std::isnan(b)) {
      far += std::isnan(a) != std::isnan(b);
      continue;
    }
    const float step = t == DType::bf16 ? std::ldexp(1.0f, std::ilogb(std::max(std::fabs(b), 1e-30f)) - 7) : 0;
    const float tol = t == DType::bf16 ? ulps * step : 1e-5f * std::max(std::fabs(b), 1e-6f);
    far += std::fabs(a - b) > tol;
  }
  return far;
}

const DType kRowTypes[] = {DType::f32, DType::bf16};

struct Shape {
  int64_t rows, cols;
};

}  // namespace

SOL_GPU_TEST(rmsnorm_matches_cpu_bit_for_bit) {
  for (Shape s : {Shape{1, 7168}, Shape{3, 4099}, Shape{5, 127}, Shape{2, 64}, Shape{33, 1000}})
    for (DType xt : kRowTypes)
      for (DType wt : kRowTypes)
        for (DType yt : kRowTypes)
          for (int64_t offset : {0, 1}) {
            HostMatrix x = random_matrix(xt, s.rows, s.cols, uint64_t(s.cols) + 7, offset == 1);
            HostMatrix w = random_matrix(wt, 1, s.cols, 99);
            HostMatrix want = random_matrix(yt, s.rows, s.cols, 1);
            rmsnorm(x.tensor(), w.tensor().reshape({s.cols}), want.tensor());
            DeviceMatrix dx = to_device(x.tensor(), offset), dw = to_device(w.tensor().reshape({s.cols}), 0);
            DeviceMatrix dy = poisoned(yt, {s.rows, s.cols}, offset);
            rmsnorm(dx.view, dw.view, dy.view);
            const int64_t wrong = count_differences(to_host(dy.view), want.bytes, yt);
            SOL_EXPECT(wrong == 0, s.rows, "x", s.cols, " ", dtype_name(xt), "/", dtype_name(wt), "/", dtype_name(yt),
                       " offset ", offset, ": ", wrong, " outputs differ");
          }
}

SOL_GPU_TEST(add_rmsnorm_matches_cpu_bit_for_bit) {
  for (Shape s : {Shape{1, 7168}, Shape{4, 4099}, Shape{7, 96}})
    for (DType xt : kRowTypes)
      for (DType rt : kRowTypes)
        for (int64_t offset : {0, 1}) {
          const DType yt = DType::bf16, wt = DType::bf16;
          HostMatrix x = random_matrix(xt, s.rows, s.cols, 5), r = random_matrix(rt, s.rows, s.cols, 6);
          HostMatrix w = random_matrix(wt, 1, s.cols, 7), want = random_matrix(yt, s.rows, s.cols, 1);
          DeviceMatrix dx = to_device(x.tensor(), offset), dr = to_device(r.tensor(), offset);
          DeviceMatrix dw = to_device(w.tensor().reshape({s.cols}), 0), dy = poisoned(yt, {s.rows, s.cols}, offset);
          add_rmsnorm(x.tensor(), r.tensor(), w.tensor().reshape({s.cols}), want.tensor());
          add_rmsnorm(dx.view, dr.view, dw.view, dy.view);
          const int64_t wrong_y = count_differences(to_host(dy.view), want.bytes, yt);
          const int64_t wrong_r = count_differences(to_host(dr.view), r.bytes, rt);
          SOL_EXPECT(wrong_y == 0 && wrong_r == 0, s.rows, "x", s.cols, " x ", dtype_name(xt), " residual ",
                     dtype_name(rt), " offset ", offset, ": ", wrong_y, " outputs and ", wrong_r, " residuals differ");
        }
}

// Per-token codes and scales of quant_fp8_per_token, rmsnorm_quant_fp8 (both bit for bit the
// CPU's) and per-block quantization.
SOL_GPU_TEST(quant_fp8_matches_cpu_bit_for_bit) {
  for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0})
    for (int64_t group : {64, 128})
      for (Shape s : {Shape{1, 7168}, Shape{5, 640}, Shape{37, 128}})
        for (DType xt : kRowTypes)
          for (int64_t offset : {0, 1}) {
            const QuantOptions opt{group, sf};
            HostMatrix x = random_matrix(xt, s.rows, s.cols, uint64_t(s.rows * group), true);
            std::vector<uint8_t> q(size_t(s.rows * s.cols));
            std::vector<float> sc(size_t(s.rows * s.cols / group));
            quant_fp8_per_token(x.tensor(), Tensor(q.data(), DType::f8e4m3, {s.rows, s.cols}),
                                Tensor(sc.data(), DType::f32, {s.rows, s.cols / group}), opt);
            DeviceMatrix dx = to_device(x.tensor(), offset), dq = poisoned(DType::f8e4m3, {s.rows, s.cols}, offset);
            DeviceMatrix ds = poisoned(DType::f32, {s.rows, s.cols / group}, 0);
            quant_fp8_per_token(dx.view, dq.view, ds.view, opt);
            std::vector<uint8_t> sc_bytes(sc.size() * 4);
            std::memcpy(sc_bytes.data(), sc.data(), sc_bytes.size());
            const int64_t wq = count_differences(to_host(dq.view), q, DType::f8e4m3);
            const int64_t ws = count_differences(to_host(ds.view), sc_bytes, DType::f32);
            SOL_EXPECT(wq == 0 && ws == 0, "per token ", s.rows, "x", s.cols, " ", dtype_name(xt), " group ", group,
                       sf == ScaleFormat::ue8m0 ? " ue8m0" : " f32 scales", " offset ", offset, ": ", wq, " codes, ", ws,
                       " scales differ");

            HostMatrix w = random_matrix(xt, 1, s.cols, 3);
            const Tensor wv = w.tensor().reshape({s.cols});
            rmsnorm_quant_fp8(x.tensor(), wv, Tensor(q.data(), DType::f8e4m3, {s.rows, s.cols}),
                              Tensor(sc.data(), DType::f32, {s.rows, s.cols / group}), {}, opt);
            DeviceMatrix dw = to_device(wv, 0);
            rmsnorm_quant_fp8(dx.view, dw.view, dq.view, ds.view, {}, opt);
            std::vector<uint8_t> got_q = to_host(dq.view), got_s = to_host(ds.view);
            std::memcpy(sc_bytes.data(), sc.data(), sc_bytes.size());
            // Rows holding NaN or inf normalise to NaN: NaN codes (0x7F or 0xFF: the CPU's paths
            // differ in the sign) and NaN scales in both.
            int64_t wrong = 0;
            for (int64_t i = 0; i < s.rows * s.cols; ++i)
              wrong += (q[size_t(i)] & 0x7f) == 0x7f ? (got_q[size_t(i)] & 0x7f) != 0x7f : got_q[size_t(i)] != q[size_t(i)];
            wrong += count_differences(got_s, sc_bytes, DType::f32);
            SOL_EXPECT(wrong == 0, "rmsnorm_quant_fp8 ", s.rows, "x", s.cols, " ", dtype_name(xt), " group ", group,
                       " offset ", offset, ": ", wrong, " codes or scales differ");
          }
  for (Shape s : {Shape{259, 640}, Shape{128, 128}, Shape{1, 256}})
    for (DType xt : kRowTypes)
      for (ScaleFormat sf : {ScaleFormat::f32, ScaleFormat::ue8m0}) {
        const int64_t brows = (s.rows + 127) / 128, bcols = s.cols / 128;
        HostMatrix w = random_matrix(xt, s.rows, s.cols, 11, true);
        std::vector<uint8_t> q(size_t(s.rows * s.cols));
        std::vector<float> sc(size_t(brows * bcols));
        quant_fp8_per_block(w.tensor(), Tensor(q.data(), DType::f8e4m3, {s.rows, s.cols}),
                            Tensor(sc.data(), DType::f32, {brows, bcols}), {128, sf});
        DeviceMatrix dw = to_device(w.tensor(), 0), dq = poisoned(DType::f8e4m3, {s.rows, s.cols}, 0);
        DeviceMatrix ds = poisoned(DType::f32, {brows, bcols}, 0);
        quant_fp8_per_block(dw.view, dq.view, ds.view, {128, sf});
        std::vector<uint8_t> sc_bytes(sc.size() * 4);
        std::memcpy(sc_bytes.data(), sc.data(), sc_bytes.size());
        const int64_t wq = count_differences(to_host(dq.view), q, DType::f8e4m3);
        const int64_t ws = count_differences(to_host(ds.view), sc_bytes, DType::f32);
        SOL_EXPECT(wq == 0 && ws == 0, "per block ", s.rows, "x", s.cols, " ", dtype_name(xt), ": ", wq, " codes, ", ws,
                   " scales differ");
      }
}

SOL_GPU_TEST(activations_match_cpu) {
  for (Shape s : {Shape{1, 7168}, Shape{3, 4099}, Shape{17, 100}, Shape{2, 8}})
    for (DType t : kRowTypes)
      for (DType yt : kRowTypes)
        for (int64_t offset : {0, 1}) {
          if (s.cols > 5000 && small_only()) continue;
          HostMatrix gu = random_matrix(t, s.rows, 2 * s.cols, 21, true);
          HostMatrix want = random_matrix(yt, s.rows, s.cols, 1);
          silu_mul(gu.tensor(), want.tensor());
          DeviceMatrix dgu = to_device(gu.tensor(), offset), dy = poisoned(yt, {s.rows, s.cols}, offset);
          silu_mul(dgu.view, dy.view);
          const int64_t far = count_far(to_host(dy.view), want.bytes, yt, 2);
          SOL_EXPECT(far == 0, "silu_mul ", s.rows, "x", s.cols, " ", dtype_name(t), "->", dtype_name(yt), " offset ",
                     offset, ": ", far, " outputs beyond tolerance");
          for (GeluForm form : {GeluForm::tanh, GeluForm::erf}) {
            HostMatrix x = random_matrix(t, s.rows, s.cols, 22, true);
            gelu(x.tensor(), want.tensor(), form);
            DeviceMatrix dx = to_device(x.tensor(), offset), dg = poisoned(yt, {s.rows, s.cols}, offset);
            gelu(dx.view, dg.view, form);
            const int64_t g_far = count_far(to_host(dg.view), want.bytes, yt, 2);
            SOL_EXPECT(g_far == 0, "gelu ", form == GeluForm::erf ? "erf " : "tanh ", s.rows, "x", s.cols, " ",
                       dtype_name(t), "->", dtype_name(yt), " offset ", offset, ": ", g_far, " outputs beyond tolerance");
          }
        }
}

// The fused quantization of the activations is quant_fp8_per_token of the device's own bf16
// output, bit for bit (the CPU's bf16 output may differ by an ulp, and so its codes).
SOL_GPU_TEST(activation_quant_is_the_device_composition) {
  for (Shape s : {Shape{1, 7168}, Shape{9, 384}})
    for (DType t : kRowTypes)
      for (int64_t offset : {0, 1}) {
        const QuantOptions opt{128, ScaleFormat::ue8m0};
        HostMatrix gu = random_matrix(t, s.rows, 2 * s.cols, 31, true);
        DeviceMatrix dgu = to_device(gu.tensor(), offset), y = poisoned(DType::bf16, {s.rows, s.cols}, 0);
        DeviceMatrix q1 = poisoned(DType::f8e4m3, {s.rows, s.cols}, 0), s1 = poisoned(DType::f32, {s.rows, s.cols / 128}, 0);
        DeviceMatrix q2 = poisoned(DType::f8e4m3, {s.rows, s.cols}, offset), s2 = poisoned(DType::f32, {s.rows, s.cols / 128}, 0);
        silu_mul(dgu.view, y.view);
        quant_fp8_per_token(y.view, q1.view, s1.view, opt);
        silu_mul_quant_fp8(dgu.view, q2.view, s2.view, opt);
        SOL_EXPECT(to_host(q1.view) == to_host(q2.view) && to_host(s1.view) == to_host(s2.view), "silu_mul_quant_fp8 ",
                   s.rows, "x", s.cols, " ", dtype_name(t), " offset ", offset);
        HostMatrix x = random_matrix(t, s.rows, s.cols, 32, true);
        DeviceMatrix dx = to_device(x.tensor(), offset);
        gelu(dx.view, y.view, GeluForm::erf);
        quant_fp8_per_token(y.view, q1.view, s1.view, opt);
        gelu_quant_fp8(dx.view, q2.view, s2.view, GeluForm::erf, opt);
        SOL_EXPECT(to_host(q1.view) == to_host(q2.view) && to_host(s1.view) == to_host(s2.view), "gelu_quant_fp8 ",
                   s.rows, "x", s.cols, " ", dtype_name(t), " offset ", offset);
      }
}

}  // namespace sol
