#include "sol/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/quant.h"
#include "hw/kernel_select.h"
#include "core/parallel.h"
#include "ops/common/rows.h"
#include "hw/streaming.h"
#include "ops/common/validate.h"
#include "ops/quant/fused_quant.h"
#include "ops/quant/quant_backends.h"
#include "sol/error.h"
#include "sol/hw.h"

namespace sol {

namespace {

constexpr float kAmaxFloor = 1e-4f;
constexpr int64_t kBlock = 128;  // weight blocks are 128 x 128, as DeepGEMM's B scales

float canonical_amax(float amax) {
  if (std::isnan(amax)) return __builtin_nanf("");
  return amax > kAmaxFloor ? amax : kAmaxFloor;
}

void require_matrix(const char* op, const char* name, const Tensor& t) {
  // (`if ... fail` where a message part is a built string: check() would build it every call.)
  if (t.ndim() != 2) fail(op, name, " must be 2-d but is ", describe_text(t));
  check(t.numel() == 0 || t.stride(1) == 1, op, name, " rows must be dense (stride(1) = 1) but ",
        name, ".strides = [", t.stride(0), ", ", t.stride(1), "]");
}

void validate(const char* op, const Tensor& x, const Tensor& q, const Tensor& scales,
              const QuantOptions& opt, int64_t scale_rows) {
  check(opt.group > 0 && opt.group % 16 == 0, op, "group = ", opt.group, " but must be a positive multiple of 16");
  require_matrix(op, "x", x);
  require_matrix(op, "q", q);
  require_matrix(op, "scales", scales);
  check(x.dtype() == DType::f32 || x.dtype() == DType::bf16, op, "x.dtype = ", dtype_name(x.dtype()),
        " but must be f32 or bf16");
  check(q.dtype() == DType::f8e4m3, op, "q.dtype = ", dtype_name(q.dtype()), " but must be f8e4m3");
  check(scales.dtype() == DType::f32, op, "scales.dtype = ", dtype_name(scales.dtype()), " but must be f32");
  require_same_shape(op, "x", x, "q", q);
  check(x.shape(1) % opt.group == 0, op, "x.shape[1] = ", x.shape(1), " but must be a multiple of the group (",
        opt.group, ")");
  if (scales.shape(0) != scale_rows || scales.shape(1) != x.shape(1) / opt.group)
    fail(op, "scales.shape = ", scales.shape_string(), " but expected [", scale_rows, ", ", x.shape(1) / opt.group,
         "]");
  require_no_overlap(op, "x", x, "q", q);
  require_no_overlap(op, "x", x, "scales", scales);
  require_no_overlap(op, "q", q, "scales", scales);
}


}  // namespace

const OpBackends<QuantEntry>& quant_per_token_backends() {
  static const OpBackends<QuantEntry> b{quant_fp8_per_token_cpu, SOL_CUDA_ENTRY(quant_fp8_per_token_cuda)};
  return b;
}

const OpBackends<QuantEntry>& quant_per_block_backends() {
  static const OpBackends<QuantEntry> b{quant_fp8_per_block_cpu, SOL_CUDA_ENTRY(quant_fp8_per_block_cuda)};
  return b;
}

float fp8_scale_from_amax(float amax, ScaleFormat format) {
  float t = amax / 448.0f;
  if (format == ScaleFormat::f32 || std::isnan(t) || std::isinf(t)) return t;
  // The smallest power of two >= t: keep the exponent, bump it when any mantissa bit is set.
  uint32_t bits;
  std::memcpy(&bits, &t, 4);
  if (bits & 0x7FFFFFu) bits = (bits & 0xFF800000u) + 0x800000u;
  std::memcpy(&t, &bits, 4);
  return t;
}

float fp8_multiplier(float amax, float scale, ScaleFormat format) {
  return format == ScaleFormat::f32 ? 448.0f / amax : 1.0f / scale;
}

void quant_fp8_per_token(const Tensor& x, const Tensor& q, const Tensor& scales, const QuantOptions& opt) {
  const char* op = "quant_fp8_per_token";
  validate(op, x, q, scales, opt, x.ndim() == 2 ? x.shape(0) : 0);
  require_same_device(op, "x", x, "scales", scales);
  backend_entry(quant_per_token_backends(), op, x.device())(x, q, scales, opt);
}

void quant_fp8_per_token_cpu(const Tensor& x, const Tensor& q, const Tensor& scales, const QuantOptions& opt) {
  const int64_t rows = x.shape(0), cols = x.shape(1), groups = cols / opt.group;
  if (rows == 0 || cols == 0) return;
  const kernels::QuantKernels& k = quant_kernels();
  const size_t es = dtype_size(x.dtype());
  const bool fused = k.quant_row_e4m3 && opt.group % 16 == 0;
  const bool stream = should_stream(q.nbytes());
  const TuningParams& tp = tuning().params;  // read once per call
  parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
    if (fused) {
      // Streamed rows are fenced once per thread, not once per row (kernels/quant.h).
      for (int64_t r = r0; r < r1; ++r)
        k.quant_row_e4m3(row_at(x, r), x.dtype(), cols, opt.group, opt.scale == ScaleFormat::ue8m0,
                        reinterpret_cast<uint8_t*>(row_at(q, r)), reinterpret_cast<float*>(row_at(scales, r)),
                        scales.stride(1), stream, tp, /*fence=*/false);
      if (stream) k.stream_fence();
      return;
    }
    std::vector<float> scaled(static_cast<size_t>(cols));  // one row, L1/L2-resident between the passes
    for (int64_t r = r0; r < r1; ++r) {
      const char* xr = row_at(x, r);
      auto* sr = reinterpret_cast<float*>(row_at(scales, r));
      for (int64_t g = 0; g < groups; ++g) {
        const char* xg = xr + g * opt.group * int64_t(es);
        float amax = canonical_amax(k.abs_max(xg, x.dtype(), opt.group));
        float s = fp8_scale_from_amax(amax, opt.scale);
        sr[g * scales.stride(1)] = s;
        // A NaN group is all 0x7F, as the fused kernels write it: x * NaN would keep a NaN
        // element's own sign (0xFF).
        if (std::isnan(amax)) std::fill_n(scaled.data() + g * opt.group, opt.group, __builtin_nanf(""));
        else k.scale_to_f32(xg, x.dtype(), fp8_multiplier(amax, s, opt.scale), scaled.data() + g * opt.group, opt.group);
      }
      k.from_f32(scaled.data(), row_at(q, r), DType::f8e4m3, cols);
    }
  });
}

void quant_fp8_bf16_row(const kernels::QuantKernels& k, const uint16_t* row, int64_t h, uint8_t* q_row,
                        float* scales_row, int64_t scale_stride, const QuantOptions& qopt, bool stream,
                        const TuningParams& tp) {
  if (k.quant_row_e4m3) {
    k.quant_row_e4m3(row, DType::bf16, h, qopt.group, qopt.scale == ScaleFormat::ue8m0, q_row, scales_row,
                     scale_stride, stream, tp, /*fence=*/true);
    return;
  }
  Tensor x(const_cast<uint16_t*>(row), DType::bf16, {1, h});
  Tensor q(q_row, DType::f8e4m3, {1, h});
  const int64_t shape[2] = {1, h / qopt.group}, strides[2] = {h / qopt.group * scale_stride, scale_stride};
  Tensor s(scales_row, DType::f32, shape, strides);
  quant_fp8_per_token(x, q, s, qopt);
}

void quant_fp8_per_block(const Tensor& w, const Tensor& q, const Tensor& scales, const QuantOptions& opt) {
  const char* op = "quant_fp8_per_block";
  check(opt.group == kBlock, op, "group = ", opt.group, " but weight blocks are 128 x 128");
  validate(op, w, q, scales, opt, w.ndim() == 2 ? (w.shape(0) + kBlock - 1) / kBlock : 0);
  require_same_device(op, "w", w, "scales", scales);
  backend_entry(quant_per_block_backends(), op, w.device())(w, q, scales, opt);
}

void quant_fp8_per_block_cpu(const Tensor& w, const Tensor& q, const Tensor& scales, const QuantOptions& opt) {
  const int64_t rows = w.shape(0), cols = w.shape(1), groups = cols / kBlock;
  if (rows == 0 || cols == 0) return;
  const kernels::QuantKernels& k = quant_kernels();
  const size_t es = dtype_size(w.dtype());
  const int64_t block_rows = scales.shape(0);
  if (k.quant_panel_mults_bf16 && w.dtype() == DType::bf16) {
    // By column panels of 4 blocks (128 rows x 512 columns, 128 KiB of bf16), in
    // order within each thread's block rows: a whole 128-row band is 1.8 MB at hidden 7168, more
    // than the 1 MiB L2, and was read twice, from DRAM then from L3. Three panels are in flight:
    // panel k is encoded from L2 while panel k + 1, requested one panel earlier, goes through
    // the abs-max from L2, and panel k + 2 is requested into L2 (the kernel says why).
    // (2 and 4 blocks measured alike, 6 and 8 slower: three panels of those crowd the L2.)
    constexpr int64_t panel_blocks = 4;
    const int64_t panel_cols = panel_blocks * kBlock, panels = (cols + panel_cols - 1) / panel_cols;
    const bool stream = should_stream(q.nbytes());
    const bool ue8m0 = opt.scale == ScaleFormat::ue8m0;
    parallel_ranges(block_rows, 1, [&](int64_t b0, int64_t b1) {
      std::vector<uint16_t> acc[2] = {std::vector<uint16_t>(static_cast<size_t>(panel_blocks * 32)),
                                      std::vector<uint16_t>(static_cast<size_t>(panel_blocks * 32))};
      std::vector<float> mult(static_cast<size_t>(panel_blocks));
      std::vector<uint8_t> special(static_cast<size_t>(panel_blocks));
      const int64_t n = (b1 - b0) * panels;  // panels of this range, band by band
      auto band = [&](int64_t i) { return b0 + i / panels; };
      auto band_rows = [&](int64_t i) { return std::min(rows, (band(i) + 1) * kBlock) - band(i) * kBlock; };
      auto col0 = [&](int64_t i) { return i % panels * panel_cols; };
      auto width = [&](int64_t i) { return std::min(cols - col0(i), panel_cols); };
      auto x_at = [&](int64_t i) {
        return reinterpret_cast<const uint16_t*>(row_at(w, band(i) * kBlock)) + col0(i);
      };
      auto amax_of = [&](int64_t i) {
        kernels::PanelAmax a;
        if (i >= n) return a;
        std::fill(acc[i & 1].begin(), acc[i & 1].end(), uint16_t(0));
        a.x = x_at(i), a.stride = w.stride(0), a.rows = band_rows(i), a.cols = width(i), a.acc = acc[i & 1].data();
        return a;
      };
      auto prefetch_of = [&](int64_t i) {
        kernels::PanelPrefetch f;
        if (i >= n) return f;
        f.base = reinterpret_cast<const char*>(x_at(i)), f.stride = w.stride(0) * 2, f.rows = band_rows(i);
        f.lines = width(i) * 2 / 64;
        return f;
      };
      k.block_amax_rows_bf16(amax_of(0), prefetch_of(1));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t groups = width(i) / kBlock;
        auto* sr = reinterpret_cast<float*>(row_at(scales, band(i))) + col0(i) / kBlock * scales.stride(1);
        for (int64_t g = 0; g < groups; ++g) {
          const float raw = k.block_amax_finish(acc[i & 1].data() + g * 32);
          const float a = canonical_amax(raw);
          const float s = fp8_scale_from_amax(a, opt.scale);
          sr[g * scales.stride(1)] = s;
          mult[size_t(g)] = fp8_multiplier(a, s, opt.scale);
          special[size_t(g)] = !std::isfinite(raw);
        }
        k.quant_panel_mults_bf16(x_at(i), w.stride(0), band_rows(i), width(i), mult.data(), special.data(), ue8m0,
                                 reinterpret_cast<uint8_t*>(row_at(q, band(i) * kBlock)) + col0(i), q.stride(0),
                                 stream, amax_of(i + 1), prefetch_of(i + 2));
      }
    });
    return;
  }
  parallel_ranges(block_rows, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> scaled(static_cast<size_t>(cols));
    std::vector<float> amax(static_cast<size_t>(groups)), mult(static_cast<size_t>(groups));
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r_begin = b * kBlock, r_end = std::min(rows, r_begin + kBlock);
      auto* sr = reinterpret_cast<float*>(row_at(scales, b));
      for (int64_t g = 0; g < groups; ++g) {  // amax over the whole 128 x 128 block first
        float m = 0.0f;
        for (int64_t r = r_begin; r < r_end; ++r) {
          float v = k.abs_max(row_at(w, r) + g * kBlock * int64_t(es), w.dtype(), kBlock);
          m = std::isnan(v) || std::isnan(m) ? __builtin_nanf("") : (v > m ? v : m);
        }
        amax[size_t(g)] = canonical_amax(m);
        float s = fp8_scale_from_amax(amax[size_t(g)], opt.scale);
        sr[g * scales.stride(1)] = s;
        mult[size_t(g)] = fp8_multiplier(amax[size_t(g)], s, opt.scale);
      }
      for (int64_t r = r_begin; r < r_end; ++r) {
        for (int64_t g = 0; g < groups; ++g)
          k.scale_to_f32(row_at(w, r) + g * kBlock * int64_t(es), w.dtype(), mult[size_t(g)],
                         scaled.data() + g * kBlock, kBlock);
        k.from_f32(scaled.data(), row_at(q, r), DType::f8e4m3, cols);
      }
    }
  });
}

void dequant_fp8_per_token(const Tensor& q, const Tensor& scales, const Tensor& y, const QuantOptions& opt) {
  const char* op = "dequant_fp8_per_token";
  check(opt.group > 0, op, "group = ", opt.group, " but must be positive");
  require_matrix(op, "q", q);
  require_matrix(op, "y", y);
  require_matrix(op, "scales", scales);
  check(q.dtype() == DType::f8e4m3, op, "q.dtype = ", dtype_name(q.dtype()), " but must be f8e4m3");
  check(y.dtype() == DType::bf16 || y.dtype() == DType::f32, op, "y.dtype = ", dtype_name(y.dtype()),
        " but must be bf16 or f32");
  check(scales.dtype() == DType::f32, op, "scales.dtype = ", dtype_name(scales.dtype()), " but must be f32");
  require_same_shape(op, "q", q, "y", y);
  check(q.shape(1) % opt.group == 0, op, "q.shape[1] = ", q.shape(1), " but must be a multiple of the group (",
        opt.group, ")");
  if (scales.shape(0) != q.shape(0) || scales.shape(1) != q.shape(1) / opt.group)
    fail(op, "scales.shape = ", scales.shape_string(), " but expected [", q.shape(0), ", ", q.shape(1) / opt.group, "]");
  require_no_overlap(op, "q", q, "y", y);
  const int64_t rows = q.shape(0), cols = q.shape(1), groups = cols / opt.group;
  if (rows == 0 || cols == 0) return;
  const kernels::QuantKernels& k = quant_kernels();
  if (k.dequant_row && opt.group % 64 == 0) {
    const bool stream = should_stream(y.nbytes());
    const int64_t ahead = tuning().params.pass_prefetch_bytes;
    parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
      // Streamed rows are fenced once per thread, not once per row (kernels/quant.h).
      for (int64_t r = r0; r < r1; ++r)
        k.dequant_row(reinterpret_cast<const uint8_t*>(row_at(q, r)), reinterpret_cast<const float*>(row_at(scales, r)),
                      scales.stride(1), cols, opt.group, row_at(y, r), y.dtype(), stream, ahead, /*fence=*/false);
      if (stream) k.stream_fence();
    });
    return;
  }
  parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      auto* qr = reinterpret_cast<const uint8_t*>(row_at(q, r));
      auto* sr = reinterpret_cast<const float*>(row_at(scales, r));
      for (int64_t g = 0; g < groups; ++g)
        k.dequant_scale(qr + g * opt.group, sr[g * scales.stride(1)], row.data() + g * opt.group, opt.group);
      k.from_f32(row.data(), row_at(y, r), y.dtype(), cols);
    }
  });
}

}  // namespace sol
