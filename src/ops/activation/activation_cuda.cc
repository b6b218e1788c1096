// The activation ops' CUDA entries (src/kernels/cuda/activation.cuh): elementwise over rows with
// 16-byte vectors where every row is aligned; the fused variants quantize per token as
// quant_fp8_per_token does the op's bf16 output, bit for bit.
#include "ops/activation/activation_backends.h"
#include "ops/quant/device_rows_cuda.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

const cuda::CudaProgram& activation_program() {
  static const cuda::CudaProgram p{"sol_activation", "#include \"kernels/cuda/activation_kernels.cuh\"\n", {}};
  return p;
}

namespace {

// gate_up's rows and the start of their up halves are 16-byte aligned.
bool gate_up_aligned(const Tensor& gu) {
  return rows_aligned16(gu) && gu.shape(1) / 2 * int64_t(dtype_size(gu.dtype())) % 16 == 0;
}

}  // namespace

void silu_mul_cuda(const Tensor& gu, const Tensor& y) {
  if (y.empty()) return;
  const cuda::Kernel& k =
      device_kernel(activation_program(), "sol_silu_mul_" + dtype_code(gu) + "_" + dtype_code(y), gu.device());
  const void* g = gu.device_data();
  void* yp = y.device_data();
  long long g_stride = gu.stride(0), y_stride = y.stride(0), rows = y.shape(0), inter = y.shape(1);
  int vec = gate_up_aligned(gu) && rows_aligned16(y);
  void* args[] = {&g, &g_stride, &yp, &y_stride, &rows, &inter, &vec};
  launch_grid_stride(k, gu.device(), rows * inter / 8 + 1, args);
}

void silu_mul_quant_fp8_cuda(const Tensor& gu, const Tensor& q, const Tensor& scales, const QuantOptions& qopt) {
  sol_cuda::QuantOut out = per_token_out("silu_mul_quant_fp8", q, scales, qopt);
  if (q.empty()) return;
  const cuda::Kernel& k = device_kernel(activation_program(), "sol_silu_mul_quant_" + dtype_code(gu), gu.device());
  const void* g = gu.device_data();
  long long g_stride = gu.stride(0), rows = q.shape(0), inter = q.shape(1);
  int vec = gate_up_aligned(gu);
  void* args[] = {&g, &g_stride, &rows, &inter, &vec, &out};
  launch_grid_stride(k, gu.device(), rows * inter / 16, args);
}

void gelu_cuda(const Tensor& x, const Tensor& y, GeluForm form) {
  if (x.device_data() == y.device_data() && !x.empty())
    check(x.dtype() == y.dtype() && x.stride(0) == y.stride(0), "gelu", "in place on ", x.device(),
          " needs x and y of one dtype and row stride, got ", describe_text(x), " and ", describe_text(y));
  if (y.empty()) return;
  const cuda::Kernel& k =
      device_kernel(activation_program(), "sol_gelu_" + dtype_code(x) + "_" + dtype_code(y), x.device());
  const void* xp = x.device_data();
  void* yp = y.device_data();
  long long x_stride = x.stride(0), y_stride = y.stride(0), rows = x.shape(0), cols = x.shape(1);
  if (x.is_contiguous() && y.is_contiguous()) cols = rows * cols, rows = 1;  // one long row: vectors throughout
  int erf_form = form == GeluForm::erf, vec = rows_aligned16(x) && rows_aligned16(y);
  void* args[] = {&xp, &x_stride, &yp, &y_stride, &rows, &cols, &erf_form, &vec};
  launch_grid_stride(k, x.device(), rows * cols / 8 + 1, args);
}

void gelu_quant_fp8_cuda(const Tensor& x, const Tensor& q, const Tensor& scales, GeluForm form,
                         const QuantOptions& qopt) {
  sol_cuda::QuantOut out = per_token_out("gelu_quant_fp8", q, scales, qopt);
  if (q.empty()) return;
  const cuda::Kernel& k = device_kernel(activation_program(), "sol_gelu_quant_" + dtype_code(x), x.device());
  const void* xp = x.device_data();
  long long x_stride = x.stride(0), rows = x.shape(0), cols = x.shape(1);
  int erf_form = form == GeluForm::erf, vec = rows_aligned16(x);
  void* args[] = {&xp, &x_stride, &rows, &cols, &erf_form, &vec, &out};
  launch_grid_stride(k, x.device(), rows * cols / 16, args);
}

}  // namespace sol
