#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "kernels/norm.h"
#include "hw/kernel_select.h"
#include "core/parallel.h"
#include "ops/common/rows.h"
#include "hw/streaming.h"
#include "ops/common/validate.h"
#include "ops/norm/norm_backends.h"
#include "ops/quant/fused_quant.h"
#include "sol/error.h"
#include "sol/norm.h"
#include "sol/tuning.h"

namespace sol {

namespace {

const kernels::NormKernels& norm_kernels() { return select_kernels(kernels::norm_kernel_table(), "norm"); }

bool float_io(DType t) { return t == DType::f32 || t == DType::bf16; }

void require_rows(const char* op, const char* name, const Tensor& t) {
  if (t.ndim() != 2) fail(op, name, " must be 2-d [tokens, hidden] but is ", describe_text(t));
  check(float_io(t.dtype()), op, name, ".dtype = ", dtype_name(t.dtype()), " but must be f32 or bf16");
  check(t.numel() == 0 || t.stride(1) == 1, op, name, " rows must be dense (stride(1) = 1)");
}

void validate(const char* op, const Tensor& x, const Tensor& weight, const NormOptions& opt) {
  require_rows(op, "x", x);
  // (`if ... fail` where a message part is a built string: check() would build it every call.)
  if (weight.ndim() != 1 || weight.shape(0) != x.shape(1))
    fail(op, "weight.shape = ", weight.shape_string(), " but expected [", x.shape(1), "]");
  if (!float_io(weight.dtype()) || !weight.is_contiguous())
    fail(op, "weight must be a contiguous f32 or bf16 vector, got ", describe_text(weight));
  check(opt.eps >= 0 && std::isfinite(opt.eps), op, "eps = ", opt.eps, " but must be finite and >= 0");
  check(x.shape(1) > 0 || x.shape(0) == 0, op, "hidden size is 0");
}

char* row(const Tensor& t, int64_t r) { return row_at(t, r); }

bool all_bf16(const Tensor& a, const Tensor& b, const Tensor& c) {
  return a.dtype() == DType::bf16 && b.dtype() == DType::bf16 && c.dtype() == DType::bf16;
}

// Row r of x (and of a second tensor) for the output pass of the row before to prefetch; none
// when r is not this thread's to read.
kernels::NextRows next_rows(bool mine, const Tensor& x, int64_t r, const Tensor* second = nullptr) {
  kernels::NextRows n;
  if (!mine) return n;
  n.row[0] = row(x, r);
  n.element_bytes[0] = int64_t(dtype_size(x.dtype()));
  if (second) {
    n.row[1] = row(*second, r);
    n.element_bytes[1] = int64_t(dtype_size(second->dtype()));
  }
  return n;
}

// The bytes of this thread's rows after row r (up to r1) when they follow row r contiguously,
// else 0: how far past row r a kernel may request rows ahead.
int64_t rows_after(const Tensor& x, int64_t r, int64_t r1) {
  const int64_t row_bytes = x.shape(1) * int64_t(dtype_size(x.dtype()));
  return x.stride(0) == x.shape(1) ? (r1 - r - 1) * row_bytes : 0;
}

float inverse_rms(float sum_squares, int64_t n, float eps) {
  return 1.0f / std::sqrt(sum_squares / float(n) + eps);
}

// LayerNorm's statistics in one pass over the row: the sums of d = x - shift and d^2 around a
// shift that is the mean of the row's first kShiftSample elements (a few lines already in L1,
// not a pass of its own). For the mean of a subset S, (shift - mean)^2 <= (n / |S|) var
// (Cauchy-Schwarz), so the cancellation in E[d^2] - E[d]^2 costs at most log2(n / |S|) bits of
// the variance: 5 bits at n = 7168, whatever the row holds (an outlier in S inflates the
// variance as much as it moves the shift). The mean stays in two parts, shift + dm.
constexpr int64_t kShiftSample = 256;

struct LayerStats {
  float shift, dm_inv, inv;  // the mean is shift + dm; dm_inv = dm * inv (kernels/norm.h)
};

template <class Sum>
float layer_shift(const void* x, DType t, int64_t n, Sum&& sum, const TuningParams& tp) {
  const int64_t lead = std::min(n, kShiftSample);
  return sum(x, t, lead, tp) / float(lead);
}

LayerStats finish_layer_stats(float shift, float sd, float sd2, int64_t n, float eps) {
  const float dm = sd / float(n);
  const float v = sd2 / float(n) - dm * dm;
  // NaN (a NaN or inf in the row) stays NaN, so the whole row is NaN; rounding below 0 is 0.
  const float var = std::isnan(v) ? v : std::max(0.0f, v);
  const float inv = 1.0f / std::sqrt(var + eps);
  return {shift, dm * inv, inv};
}

template <class Sum, class ShiftedSums>
LayerStats layer_stats(const void* x, DType t, int64_t n, float eps, Sum&& sum, ShiftedSums&& shifted_sums,
                       const TuningParams& tp) {
  const float shift = layer_shift(x, t, n, sum, tp);
  float sd, sd2;
  shifted_sums(x, t, shift, n, &sd, &sd2, tp);
  return finish_layer_stats(shift, sd, sd2, n, eps);
}

// The weight (or bias) as f32 for the vector row kernels: one conversion per call instead of a
// widening per element per row; the tensor's own data when it is f32 already. The copy is not
// zeroed first (a std::vector would be: a 28 KiB memset, 2% of a 16-token rmsnorm).
class F32Vector {
 public:
  F32Vector(const Tensor& w, const kernels::NormKernels& k) {
    if (w.dtype() == DType::f32) {
      data_ = w.data_as<const float>();
      return;
    }
    copy_.reset(new float[size_t(w.numel())]);
    k.widen_to_f32(w.data(), w.dtype(), copy_.get(), w.numel());
    data_ = copy_.get();
  }
  const float* data() const { return data_; }

 private:
  std::unique_ptr<float[]> copy_;
  const float* data_ = nullptr;
};

}  // namespace

void rmsnorm_cpu(const Tensor& x, const Tensor& weight, const Tensor& y, const NormOptions& opt);
void add_rmsnorm_cpu(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& y,
                     const NormOptions& opt);
void rmsnorm_quant_fp8_cpu(const Tensor& x, const Tensor& weight, const Tensor& q, const Tensor& scales,
                           const NormOptions& opt, const QuantOptions& qopt);

const NormBackends& norm_backends() {
  static const NormBackends b{{rmsnorm_cpu, SOL_CUDA_ENTRY(rmsnorm_cuda)},
                              {add_rmsnorm_cpu, SOL_CUDA_ENTRY(add_rmsnorm_cuda)},
                              {rmsnorm_quant_fp8_cpu, SOL_CUDA_ENTRY(rmsnorm_quant_fp8_cuda)}};
  return b;
}

void rmsnorm(const Tensor& x, const Tensor& weight, const Tensor& y, const NormOptions& opt) {
  const char* op = "rmsnorm";
  validate(op, x, weight, opt);
  require_rows(op, "y", y);
  require_same_shape(op, "x", x, "y", y);
  require_in_place_or_no_overlap(op, "x", x, "y", y);
  require_no_overlap(op, "weight", weight, "y", y);
  require_same_device(op, "x", x, "weight", weight);
  backend_entry(norm_backends().rmsnorm, op, x.device())(x, weight, y, opt);
}

void rmsnorm_cpu(const Tensor& x, const Tensor& weight, const Tensor& y, const NormOptions& opt) {
  const int64_t rows = x.shape(0), h = x.shape(1);
  const kernels::NormKernels& k = norm_kernels();
  const TuningParams& tp = tuning().params;  // read once per call
  // In place (y == x) is allowed: each row is read completely before it is written.
  if (k.rms_apply_bf16w_next && all_bf16(x, weight, y)) {
    const auto* w = weight.data_as<const uint16_t>();
    const bool stream = should_stream(y.nbytes());
    parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
      auto xrow = [&](int64_t r) { return reinterpret_cast<const uint16_t*>(row(x, r)); };
      float ss = k.sum_squares(xrow(r0), DType::bf16, h, tp);
      for (int64_t r = r0; r + 1 < r1; ++r)  // row r's output and row r + 1's statistics in one loop
        ss = k.rms_apply_bf16w_next(xrow(r), inverse_rms(ss, h, opt.eps), w, reinterpret_cast<uint16_t*>(row(y, r)),
                                    h, stream, xrow(r + 1), rows_after(x, r + 1, r1), tp);
      k.rms_apply_bf16w(xrow(r1 - 1), inverse_rms(ss, h, opt.eps), w, reinterpret_cast<uint16_t*>(row(y, r1 - 1)), h,
                        stream, {});
      if (stream) k.stream_fence();
    });
    return;
  }
  if (k.rms_apply) {
    const F32Vector wf(weight, k);
    const float* w = wf.data();
    const bool stream = should_stream(y.nbytes());
    parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        float inv = inverse_rms(k.sum_squares(row(x, r), x.dtype(), h, tp), h, opt.eps);
        k.rms_apply(row(x, r), x.dtype(), inv, w, row(y, r), y.dtype(), h, stream, next_rows(r + 1 < r1, x, r + 1));
      }
      if (stream) k.stream_fence();  // the rows' streamed stores, once per thread
    });
    return;
  }
  parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float inv = inverse_rms(k.sum_squares(row(x, r), x.dtype(), h, tp), h, opt.eps);
      k.scale_by_weight(row(x, r), x.dtype(), inv, weight.data(), weight.dtype(), row(y, r), y.dtype(), h);
    }
  });
}

void add_rmsnorm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& y,
                 const NormOptions& opt) {
  const char* op = "add_rmsnorm";
  validate(op, x, weight, opt);
  require_rows(op, "residual", residual);
  require_rows(op, "y", y);
  require_same_shape(op, "x", x, "residual", residual);
  require_same_shape(op, "x", x, "y", y);
  require_no_overlap(op, "x", x, "residual", residual);
  require_in_place_or_no_overlap(op, "x", x, "y", y);
  require_no_overlap(op, "residual", residual, "y", y);
  require_no_overlap(op, "weight", weight, "y", y);
  require_same_device(op, "x", x, "weight", weight);
  backend_entry(norm_backends().add_rmsnorm, op, x.device())(x, residual, weight, y, opt);
}

void add_rmsnorm_cpu(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& y,
                     const NormOptions& opt) {
  const int64_t rows = x.shape(0), h = x.shape(1);
  const kernels::NormKernels& k = norm_kernels();
  const TuningParams& tp = tuning().params;  // read once per call
  if (k.add_sum_squares && k.rms_apply_bf16w && all_bf16(residual, weight, y) && x.dtype() == DType::bf16) {
    const auto* w = weight.data_as<const uint16_t>();
    const bool stream = should_stream(y.nbytes());
    parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        auto* res = reinterpret_cast<uint16_t*>(row(residual, r));
        float inv = inverse_rms(k.add_sum_squares(row(x, r), DType::bf16, res, DType::bf16, res, h, tp), h, opt.eps);
        k.rms_apply_bf16w(res, inv, w, reinterpret_cast<uint16_t*>(row(y, r)), h, stream,
                          next_rows(r + 1 < r1, x, r + 1, &residual));
      }
      if (stream) k.stream_fence();
    });
    return;
  }
  if (k.add_sum_squares && k.rms_apply) {
    const DType rt = residual.dtype();
    const F32Vector wf(weight, k);
    const float* w = wf.data();
    const bool stream = should_stream(y.nbytes());
    parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
      // The new residual is stored in place with ordinary stores: its lines are in cache from
      // the read (no extra read for ownership) and the norm pass reads it back from L1.
      for (int64_t r = r0; r < r1; ++r) {
        void* res = row(residual, r);
        float inv = inverse_rms(k.add_sum_squares(row(x, r), x.dtype(), res, rt, res, h, tp), h, opt.eps);
        k.rms_apply(res, rt, inv, w, row(y, r), y.dtype(), h, stream, next_rows(r + 1 < r1, x, r + 1, &residual));
      }
      if (stream) k.stream_fence();
    });
    return;
  }
  parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      void* res = row(residual, r);
      k.add_into(row(x, r), x.dtype(), res, residual.dtype(), h);  // the row stays in L1 for the norm
      float inv = inverse_rms(k.sum_squares(res, residual.dtype(), h, tp), h, opt.eps);
      k.scale_by_weight(res, residual.dtype(), inv, weight.data(), weight.dtype(), row(y, r), y.dtype(), h);
    }
  });
}

void layernorm(const Tensor& x, const Tensor& weight, const Tensor* bias, const Tensor& y, const NormOptions& opt) {
  const char* op = "layernorm";
  validate(op, x, weight, opt);
  require_rows(op, "y", y);
  require_same_shape(op, "x", x, "y", y);
  if (bias && !(bias->ndim() == 1 && bias->shape(0) == x.shape(1) && bias->dtype() == weight.dtype() &&
                bias->is_contiguous()))
    fail(op, "bias = ", describe_text(*bias), " but expected contiguous [", x.shape(1), "] ", dtype_name(weight.dtype()));
  require_in_place_or_no_overlap(op, "x", x, "y", y);
  require_no_overlap(op, "weight", weight, "y", y);
  if (bias) require_no_overlap(op, "bias", *bias, "y", y);
  // CPU only: a device tensor is named here, before a worker thread could meet it.
  require_data(op, "x", x);
  require_data(op, "weight", weight);
  if (bias) require_data(op, "bias", *bias);
  require_data(op, "y", y);
  const int64_t rows = x.shape(0), h = x.shape(1);
  const kernels::NormKernels& k = norm_kernels();
  const TuningParams& tp = tuning().params;  // read once per call
  if (k.layernorm_apply_bf16w_next && bias && all_bf16(x, weight, y)) {
    const auto* w = weight.data_as<const uint16_t>();
    const auto* b = bias->data_as<const uint16_t>();
    const bool stream = should_stream(y.nbytes());
    parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
      auto xrow = [&](int64_t r) { return reinterpret_cast<const uint16_t*>(row(x, r)); };
      auto yrow = [&](int64_t r) { return reinterpret_cast<uint16_t*>(row(y, r)); };
      LayerStats st = layer_stats(xrow(r0), DType::bf16, h, opt.eps, k.sum, k.shifted_sums, tp);
      for (int64_t r = r0; r + 1 < r1; ++r) {  // row r's output and row r + 1's statistics in one loop
        const float shift = layer_shift(xrow(r + 1), DType::bf16, h, k.sum, tp);
        float sd, sd2;
        k.layernorm_apply_bf16w_next(xrow(r), st.shift, st.dm_inv, st.inv, w, b, yrow(r), h, stream, xrow(r + 1), shift,
                                     &sd, &sd2, rows_after(x, r + 1, r1), tp);
        st = finish_layer_stats(shift, sd, sd2, h, opt.eps);
      }
      k.layernorm_apply_bf16w(xrow(r1 - 1), st.shift, st.dm_inv, st.inv, w, b, yrow(r1 - 1), h, stream, {});
      if (stream) k.stream_fence();
    });
    return;
  }
  if (k.layernorm_apply_packed && bias && weight.dtype() == DType::bf16) {
    // bf16 weight and bias as one packed 32-bit word per element (kernels/norm.h).
    const std::unique_ptr<uint32_t[]> wb(new uint32_t[size_t(h)]);  // not zeroed: fully written
    k.pack_bf16_pairs(weight.data_as<const uint16_t>(), bias->data_as<const uint16_t>(), wb.get(), h);
    const bool stream = should_stream(y.nbytes());
    parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const LayerStats st = layer_stats(row(x, r), x.dtype(), h, opt.eps, k.sum, k.shifted_sums, tp);
        k.layernorm_apply_packed(row(x, r), x.dtype(), st.shift, st.dm_inv, st.inv, wb.get(), row(y, r), y.dtype(), h,
                                 stream, next_rows(r + 1 < r1, x, r + 1));
      }
      if (stream) k.stream_fence();
    });
    return;
  }
  if (k.layernorm_apply_f32w) {
    const F32Vector wf(weight, k);
    std::optional<F32Vector> bf;
    if (bias) bf.emplace(*bias, k);
    const float* w = wf.data();
    const float* b = bf ? bf->data() : nullptr;
    const bool stream = should_stream(y.nbytes());
    parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const LayerStats st = layer_stats(row(x, r), x.dtype(), h, opt.eps, k.sum, k.shifted_sums, tp);
        k.layernorm_apply_f32w(row(x, r), x.dtype(), st.shift, st.dm_inv, st.inv, w, b, row(y, r), y.dtype(), h,
                               stream, next_rows(r + 1 < r1, x, r + 1));
      }
      if (stream) k.stream_fence();
    });
    return;
  }
  parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const LayerStats st = layer_stats(row(x, r), x.dtype(), h, opt.eps, k.sum, k.shifted_sums, tp);
      k.layernorm_apply(row(x, r), x.dtype(), st.shift, st.dm_inv, st.inv, weight.data(), bias ? bias->data() : nullptr,
                        weight.dtype(), row(y, r), y.dtype(), h);
    }
  });
}

void rmsnorm_quant_fp8(const Tensor& x, const Tensor& weight, const Tensor& q, const Tensor& scales,
                       const NormOptions& opt, const QuantOptions& qopt) {
  const char* op = "rmsnorm_quant_fp8";
  validate(op, x, weight, opt);
  const int64_t h = x.shape(1);
  validate_fused_quant(op, "x.shape[1]", x.shape(0), h, q, scales, qopt, "x", x);
  require_same_device(op, "x", x, "weight", weight);
  require_same_device(op, "x", x, "q", q);
  require_same_device(op, "x", x, "scales", scales);
  backend_entry(norm_backends().rmsnorm_quant_fp8, op, x.device())(x, weight, q, scales, opt, qopt);
}

void rmsnorm_quant_fp8_cpu(const Tensor& x, const Tensor& weight, const Tensor& q, const Tensor& scales,
                           const NormOptions& opt, const QuantOptions& qopt) {
  const char* op = "rmsnorm_quant_fp8";
  const int64_t h = x.shape(1);
  const kernels::NormKernels& k = norm_kernels();
  const TuningParams& tp = tuning().params;  // read once per call
  const kernels::QuantKernels& qk = quant_kernels();
  if (qk.rms_quant_row_bf16 && k.rms_apply && x.dtype() == DType::bf16 && (qopt.group == 64 || qopt.group == 128)) {
    // Norm and quantization in one output pass per row, each group's bf16 values kept in
    // registers from the multiply to the codes (never stored): kernels/quant.h.
    const F32Vector wf(weight, k);
    const std::unique_ptr<float[]> w_eo(new float[size_t(h)]);  // not zeroed: fully written
    qk.even_odd_order(wf.data(), w_eo.get(), h);
    const bool stream = should_stream(q.nbytes());
    const bool ue8m0 = qopt.scale == ScaleFormat::ue8m0;
    parallel_ranges(x.shape(0), 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const auto* xr = reinterpret_cast<const uint16_t*>(row(x, r));
        const float inv = inverse_rms(k.sum_squares(xr, DType::bf16, h, tp), h, opt.eps);
        const bool done = qk.rms_quant_row_bf16(
            xr, inv, w_eo.get(), h, qopt.group, ue8m0, q.data_as<uint8_t>() + r * q.stride(0),
            scales.data_as<float>() + r * scales.stride(0), scales.stride(1), stream,
            r + 1 < r1 ? reinterpret_cast<const uint16_t*>(row(x, r + 1)) : nullptr, tp);
        if (!done) fail(op, "internal: the fused row kernel refused group ", qopt.group);
      }
    });
    return;
  }
  if (qk.quant_row_bf16_amax && k.rms_apply_bf16_amax && qopt.group % 64 == 0) {
    // The output pass also takes each group's abs-max, so the quantizer reads its row once.
    const F32Vector wf(weight, k);
    const float* w = wf.data();
    quantize_rows_fp8_given_amax(qk, x.shape(0), h, q, scales, qopt, [&](int64_t r, uint16_t* out, uint16_t* amax32) {
      float inv = inverse_rms(k.sum_squares(row(x, r), x.dtype(), h, tp), h, opt.eps);
      k.rms_apply_bf16_amax(row(x, r), x.dtype(), inv, w, out, h, qopt.group, amax32,
                            next_rows(r + 1 < x.shape(0), x, r + 1));
    });
    return;
  }
  if (k.rms_apply) {
    const F32Vector wf(weight, k);
    const float* w = wf.data();
    quantize_rows_fp8(qk, x.shape(0), h, q, scales, qopt, [&](int64_t r, uint16_t* out) {
      float inv = inverse_rms(k.sum_squares(row(x, r), x.dtype(), h, tp), h, opt.eps);
      k.rms_apply(row(x, r), x.dtype(), inv, w, out, DType::bf16, h, false, next_rows(r + 1 < x.shape(0), x, r + 1));
    });
    return;
  }
  quantize_rows_fp8(qk, x.shape(0), h, q, scales, qopt, [&](int64_t r, uint16_t* out) {
    float inv = inverse_rms(k.sum_squares(row(x, r), x.dtype(), h, tp), h, opt.eps);
    k.scale_by_weight(row(x, r), x.dtype(), inv, weight.data(), weight.dtype(), out, DType::bf16, h);
  });
}

}  // namespace sol
