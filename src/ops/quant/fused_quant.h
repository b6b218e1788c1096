#pragma once
// Fusing per-token FP8 quantization into a row-wise op: produce(r, out) writes output row r as
// bf16 into out; each row is produced into an L1-sized buffer and quantized from there, so only
// the op's inputs are read from memory and only q and scales written. The result is
// bit-identical to quant_fp8_per_token of the op's bf16 output.
#include <algorithm>
#include <cstdint>
#include <memory>

#include "kernels/activation.h"
#include "kernels/quant.h"
#include "hw/kernel_select.h"
#include "core/parallel.h"
#include "hw/streaming.h"
#include "ops/common/validate.h"
#include "sol/error.h"
#include "sol/quant.h"

namespace sol {

// The quantization family's kernel set in force (called once per op call).
inline const kernels::QuantKernels& quant_kernels() {
  return select_kernels(kernels::quant_kernel_table(), "quant_fp8");
}

// Checks q [rows, h] f8e4m3 and scales [rows, h / group] f32, apart from each other and from
// the op's input x (named x_name); `h_name` names the row length in the op's own terms
// ("x.shape[1]", "inter").
inline void validate_fused_quant(const char* op, const char* h_name, int64_t rows, int64_t h, const Tensor& q,
                                 const Tensor& scales, const QuantOptions& qopt, const char* x_name,
                                 const Tensor& x) {
  // (`if ... fail` where a message part is a built string: check() would build it every call.)
  if (!(q.ndim() == 2 && q.shape(0) == rows && q.shape(1) == h && q.dtype() == DType::f8e4m3))
    fail(op, "q = ", describe_text(q), " but expected [", rows, ", ", h, "] f8e4m3");
  check(qopt.group > 0 && qopt.group % 16 == 0, op, "group = ", qopt.group, " but must be a positive multiple of 16");
  check(h % qopt.group == 0, op, h_name, " = ", h, " but must be a multiple of the group (", qopt.group, ")");
  check(q.numel() == 0 || q.stride(1) == 1, op, "q rows must be dense (stride(1) = 1)");
  if (!(scales.ndim() == 2 && scales.shape(0) == rows && scales.shape(1) == h / qopt.group &&
        scales.dtype() == DType::f32))
    fail(op, "scales = ", describe_text(scales), " but expected [", rows, ", ", h / qopt.group, "] f32");
  check(scales.numel() == 0 || scales.stride(1) == 1, op, "scales rows must be dense (stride(1) = 1)");
  require_no_overlap(op, "q", q, "scales", scales);
  require_no_overlap(op, x_name, x, "q", q);
  require_no_overlap(op, x_name, x, "scales", scales);
}

// Quantizes one bf16 row of h elements into q_row and its scales (stride scale_stride), exactly
// as quant_fp8_per_token does that row, with the caller's quantization kernels (picked once
// per call, not per row); stream: q may be written with non-temporal stores (the caller then
// needs no fence: the row kernel ends with one); tp: the tuning in force (read once per call;
// pass_l2_prefetch_bytes 0 for a row that is an L1 buffer).
void quant_fp8_bf16_row(const kernels::QuantKernels& k, const uint16_t* row, int64_t h, uint8_t* q_row,
                        float* scales_row, int64_t scale_stride, const QuantOptions& qopt, bool stream,
                        const TuningParams& tp);

// Per-token quantization of rows made one at a time, for ops with a fused row kernel
// (activations): fused(r, buf, out) produces and quantizes row r in one pass
// (the activations' fused row kernels) and returns false for a shape it does not handle; such
// rows, and every row at a level without fused kernels or with FTZ / DAZ set, take
// produce(r, out) (row r as bf16 into an L1 buffer) and the token quantizer.
template <class FusedRow, class ProduceRow>
void quantize_rows_fp8_fused(const kernels::QuantKernels& k, int64_t rows, int64_t h, const Tensor& q,
                             const Tensor& scales, const QuantOptions& qopt, FusedRow&& fused, ProduceRow&& produce) {
  const bool stream = should_stream(q.nbytes());
  TuningParams tp = tuning().params;  // read once per call
  tp.pass_l2_prefetch_bytes = 0;      // the rows are an L1 buffer: no L2 look-ahead past its end
  parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
    // once per thread, not zeroed; 64-byte aligned for the fused kernels
    const std::unique_ptr<uint16_t[]> storage(new uint16_t[size_t(h) + 32]);
    auto* row = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(storage.get()) + 63) & ~uintptr_t(63));
    const bool try_fused = k.quant_row_e4m3 && kernels::mxcsr_keeps_subnormals();
    bool streamed = false;
    for (int64_t r = r0; r < r1; ++r) {
      uint8_t* q_row = q.data_as<uint8_t>() + r * q.stride(0);
      float* s_row = scales.data_as<float>() + r * scales.stride(0);
      if (try_fused && fused(r, row, kernels::QuantRowOut{q_row, s_row, scales.stride(1), stream})) {
        streamed = streamed || stream;
        continue;
      }
      produce(r, row);
      quant_fp8_bf16_row(k, row, h, q_row, s_row, scales.stride(1), qopt, stream, tp);
    }
    if (streamed) k.stream_fence();
  });
}

// One row at a time through an L1-sized buffer: produce(r, out) writes row r as bf16, then the
// token quantizer reads it while still in L1 (quantize_rows_fp8_fused without a fused kernel).
template <class ProduceRow>
void quantize_rows_fp8(const kernels::QuantKernels& k, int64_t rows, int64_t h, const Tensor& q, const Tensor& scales,
                       const QuantOptions& qopt, ProduceRow&& produce) {
  quantize_rows_fp8_fused(
      k, rows, h, q, scales, qopt, [](int64_t, uint16_t*, const kernels::QuantRowOut&) { return false; }, produce);
}

// quantize_rows_fp8 for a producer that also gives each group's partial maxima of |out|:
// produce(r, out, amax32) as the norms' rms_apply_bf16_amax fills them. Only where k has
// quant_row_bf16_amax, group a multiple of 64; the same bits as quantize_rows_fp8 with the same row.
template <class ProduceRow>
void quantize_rows_fp8_given_amax(const kernels::QuantKernels& k, int64_t rows, int64_t h, const Tensor& q, const Tensor& scales,
                                  const QuantOptions& qopt, ProduceRow&& produce) {
  const bool stream = should_stream(q.nbytes());
  const bool ue8m0 = qopt.scale == ScaleFormat::ue8m0;
  parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
    // once per thread, not zeroed
    const std::unique_ptr<uint16_t[]> row(new uint16_t[size_t(h)]), amax(new uint16_t[size_t(h / qopt.group * 32)]);
    for (int64_t r = r0; r < r1; ++r) {
      produce(r, row.get(), amax.get());
      k.quant_row_bf16_amax(row.get(), h, qopt.group, amax.get(), ue8m0, q.data_as<uint8_t>() + r * q.stride(0),
                            scales.data_as<float>() + r * scales.stride(0), scales.stride(1), stream);
    }
  });
}

}  // namespace sol
