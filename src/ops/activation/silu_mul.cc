#include <algorithm>
#include <vector>

#include "kernels/activation.h"
#include "ops/activation/row_pairs.h"
#include "hw/kernel_select.h"
#include "core/parallel.h"
#include "ops/common/rows.h"
#include "hw/streaming.h"
#include "ops/common/validate.h"
#include "ops/activation/activation_backends.h"
#include "ops/quant/fused_quant.h"
#include "sol/activation.h"
#include "sol/error.h"

namespace sol {

namespace {

const kernels::ActivationKernels& activation_kernels() {
  return select_kernels(kernels::activation_kernel_table(), "activation");
}

void validate_input(const char* op, const Tensor& gu) {
  check(gu.ndim() == 2, op, "gate_up must be 2-d [tokens, 2 * inter] but is ", describe_text(gu));
  check(gu.dtype() == DType::f32 || gu.dtype() == DType::bf16, op, "gate_up.dtype = ",
        dtype_name(gu.dtype()), " but must be f32 or bf16");
  check(gu.shape(1) % 2 == 0, op, "gate_up.shape[1] = ", gu.shape(1), " but must be even (gate | up)");
  check(gu.numel() == 0 || gu.stride(1) == 1, op, "gate_up rows must be dense (stride(1) = 1)");
}

char* row(const Tensor& t, int64_t r) { return row_at(t, r); }

// The up half of row r + 1 while that row is this thread's (the kernel prefetches it), else null.
const void* next_up(const Tensor& gu, int64_t r, int64_t end, int64_t inter) {
  return r + 1 < end ? row(gu, r + 1) + inter * int64_t(dtype_size(gu.dtype())) : nullptr;
}

}  // namespace

void silu_mul_cpu(const Tensor& gu, const Tensor& y);
void silu_mul_quant_fp8_cpu(const Tensor& gu, const Tensor& q, const Tensor& scales, const QuantOptions& qopt);
void gelu_cpu(const Tensor& x, const Tensor& y, GeluForm form);
void gelu_quant_fp8_cpu(const Tensor& x, const Tensor& q, const Tensor& scales, GeluForm form,
                        const QuantOptions& qopt);

const ActivationBackends& activation_backends() {
  static const ActivationBackends b{{silu_mul_cpu, SOL_CUDA_ENTRY(silu_mul_cuda)},
                                    {silu_mul_quant_fp8_cpu, SOL_CUDA_ENTRY(silu_mul_quant_fp8_cuda)},
                                    {gelu_cpu, SOL_CUDA_ENTRY(gelu_cuda)},
                                    {gelu_quant_fp8_cpu, SOL_CUDA_ENTRY(gelu_quant_fp8_cuda)}};
  return b;
}

void silu_mul(const Tensor& gu, const Tensor& y) {
  const char* op = "silu_mul";
  validate_input(op, gu);
  const int64_t rows = gu.shape(0), inter = gu.shape(1) / 2;
  check(y.ndim() == 2 && y.shape(0) == rows && y.shape(1) == inter, op, "y.shape = ", shape_text(y),
        " but expected [", rows, ", ", inter, "]");
  check(y.dtype() == DType::f32 || y.dtype() == DType::bf16, op, "y.dtype = ", dtype_name(y.dtype()),
        " but must be f32 or bf16");
  check(y.numel() == 0 || y.stride(1) == 1, op, "y rows must be dense (stride(1) = 1)");
  require_no_overlap(op, "gate_up", gu, "y", y);
  require_same_device(op, "gate_up", gu, "y", y);
  backend_entry(activation_backends().silu_mul, op, gu.device())(gu, y);
}

void silu_mul_cpu(const Tensor& gu, const Tensor& y) {
  const int64_t rows = gu.shape(0), inter = gu.shape(1) / 2;
  const kernels::ActivationKernels& k = activation_kernels();
  const TuningParams& tp = tuning().params;  // read once per call
  const int64_t es = int64_t(dtype_size(gu.dtype()));
  const bool stream = should_stream(y.numel() * int64_t(dtype_size(y.dtype())));
  parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
    auto one = [&](int64_t r, int64_t end) {
      k.silu_mul(row(gu, r), row(gu, r) + inter * es, gu.dtype(), row(y, r), y.dtype(), inter, stream,
                 next_up(gu, r, end, inter), tp);
    };
    if (!k.silu_mul2) {
      for (int64_t r = r0; r < r1; ++r) one(r, r1);
      return;
    }
    const int64_t half = (r1 - r0) / 2;
    auto side = [&](int64_t r, int64_t end) {  // end: where this half's rows stop
      return kernels::SiluMulRow{row(gu, r), row(gu, r) + inter * es, row(y, r), next_up(gu, r, end, inter)};
    };
    for_row_pairs(
        r0, r1,
        [&](int64_t a, int64_t b) {
          k.silu_mul2(side(a, r0 + half), side(b, r0 + 2 * half), gu.dtype(), y.dtype(), inter, stream, tp);
        },
        [&](int64_t r) { one(r, r1); });
  });
}

void silu_mul_quant_fp8(const Tensor& gu, const Tensor& q, const Tensor& scales, const QuantOptions& qopt) {
  const char* op = "silu_mul_quant_fp8";
  validate_input(op, gu);
  const int64_t inter = gu.shape(1) / 2;
  validate_fused_quant(op, "inter", gu.shape(0), inter, q, scales, qopt, "gate_up", gu);
  require_same_device(op, "gate_up", gu, "q", q);
  require_same_device(op, "gate_up", gu, "scales", scales);
  backend_entry(activation_backends().silu_mul_quant_fp8, op, gu.device())(gu, q, scales, qopt);
}

void silu_mul_quant_fp8_cpu(const Tensor& gu, const Tensor& q, const Tensor& scales, const QuantOptions& qopt) {
  const int64_t inter = gu.shape(1) / 2;
  const kernels::ActivationKernels& k = activation_kernels();
  const TuningParams& tp = tuning().params;  // read once per call
  const int64_t es = int64_t(dtype_size(gu.dtype()));
  const int64_t rows = gu.shape(0);
  const bool ue8m0 = qopt.scale == ScaleFormat::ue8m0;
  quantize_rows_fp8_fused(
      quant_kernels(), rows, inter, q, scales, qopt,
      [&](int64_t r, uint16_t* buf, const kernels::QuantRowOut& out) {
        return k.silu_mul_quant_row && k.silu_mul_quant_row(row(gu, r), row(gu, r) + inter * es, gu.dtype(), inter,
                                                            next_up(gu, r, rows, inter), qopt.group, ue8m0, buf, out, tp);
      },
      [&](int64_t r, uint16_t* out) {
        k.silu_mul(row(gu, r), row(gu, r) + inter * es, gu.dtype(), out, DType::bf16, inter, false, next_up(gu, r, rows, inter), tp);
      });
}

namespace {

void validate_rows(const char* op, const char* name, const Tensor& t) {
  check(t.ndim() == 2 && (t.dtype() == DType::f32 || t.dtype() == DType::bf16), op, name, " = ", describe_text(t),
        " but expected [tokens, hidden] f32 or bf16");
  check(t.numel() == 0 || t.stride(1) == 1, op, name, " rows must be dense (stride(1) = 1)");
}

}  // namespace

void gelu(const Tensor& x, const Tensor& y, GeluForm form) {
  const char* op = "gelu";
  validate_rows(op, "x", x);
  validate_rows(op, "y", y);
  require_same_shape(op, "x", x, "y", y);
  require_in_place_or_no_overlap(op, "x", x, "y", y);
  backend_entry(activation_backends().gelu, op, x.device())(x, y, form);
}

void gelu_cpu(const Tensor& x, const Tensor& y, GeluForm form) {
  const kernels::ActivationKernels& k = activation_kernels();
  const TuningParams& tp = tuning().params;  // read once per call
  const int64_t h = x.shape(1);
  // In place, y's lines were just read: streaming them out gains nothing.
  const bool stream = x.data() != y.data() && should_stream(y.numel() * int64_t(dtype_size(y.dtype())));
  const bool erf_form = form == GeluForm::erf;
  parallel_ranges(x.shape(0), 1, [&](int64_t r0, int64_t r1) {
    auto one = [&](int64_t r) { k.gelu(row(x, r), x.dtype(), row(y, r), y.dtype(), h, erf_form, stream, tp); };
    if (!k.gelu2) {
      for (int64_t r = r0; r < r1; ++r) one(r);
      return;
    }
    for_row_pairs(
        r0, r1,
        [&](int64_t a, int64_t b) {
          k.gelu2(row(x, a), row(y, a), row(x, b), row(y, b), x.dtype(), y.dtype(), h, erf_form, stream, tp);
        },
        one);
  });
}

void gelu_quant_fp8(const Tensor& x, const Tensor& q, const Tensor& scales, GeluForm form, const QuantOptions& qopt) {
  const char* op = "gelu_quant_fp8";
  validate_rows(op, "x", x);
  const int64_t h = x.shape(1);
  validate_fused_quant(op, "hidden", x.shape(0), h, q, scales, qopt, "x", x);
  require_same_device(op, "x", x, "q", q);
  require_same_device(op, "x", x, "scales", scales);
  backend_entry(activation_backends().gelu_quant_fp8, op, x.device())(x, q, scales, form, qopt);
}

void gelu_quant_fp8_cpu(const Tensor& x, const Tensor& q, const Tensor& scales, GeluForm form,
                        const QuantOptions& qopt) {
  const int64_t h = x.shape(1);
  const kernels::ActivationKernels& k = activation_kernels();
  const TuningParams& tp = tuning().params;  // read once per call
  const bool erf_form = form == GeluForm::erf, ue8m0 = qopt.scale == ScaleFormat::ue8m0;
  quantize_rows_fp8_fused(
      quant_kernels(), x.shape(0), h, q, scales, qopt,
      [&](int64_t r, uint16_t* buf, const kernels::QuantRowOut& out) {
        return k.gelu_quant_row && k.gelu_quant_row(row(x, r), x.dtype(), h, erf_form, qopt.group, ue8m0, buf, out, tp);
      },
      [&](int64_t r, uint16_t* out) { k.gelu(row(x, r), x.dtype(), out, DType::bf16, h, erf_form, false, tp); });
}

}  // namespace sol
