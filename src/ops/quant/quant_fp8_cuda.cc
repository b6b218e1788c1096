// FP8 quantization's CUDA entries (src/kernels/cuda/quant_fp8.cuh): the operands were validated
// by the op; the codes and scales are the CPU path's bit for bit.
#include "ops/quant/device_rows_cuda.h"
#include "ops/quant/quant_backends.h"
#include "sol/device.h"

namespace sol {

const cuda::CudaProgram& quant_program() {
  static const cuda::CudaProgram p{"sol_quant_fp8", "#include \"kernels/cuda/quant_fp8_kernels.cuh\"\n", {}};
  return p;
}

void quant_fp8_per_token_cuda(const Tensor& x, const Tensor& q, const Tensor& scales, const QuantOptions& opt) {
  sol_cuda::QuantOut out = per_token_out("quant_fp8_per_token", q, scales, opt);
  if (x.empty()) return;
  const cuda::Kernel& k = device_kernel(quant_program(), "sol_quant_per_token_" + dtype_code(x), x.device());
  const void* xp = x.device_data();
  long long x_stride = x.stride(0), rows = x.shape(0), cols = x.shape(1);
  int x_vec = rows_aligned16(x);
  void* args[] = {&xp, &x_stride, &x_vec, &rows, &cols, &out};
  launch_grid_stride(k, x.device(), rows * cols / 16, args);
}

void quant_fp8_per_block_cuda(const Tensor& w, const Tensor& q, const Tensor& scales, const QuantOptions& opt) {
  sol_cuda::QuantOut out = per_token_out("quant_fp8_per_block", q, scales, opt);
  if (w.empty()) return;
  const int64_t block_rows = (w.shape(0) + 127) / 128;
  check(block_rows <= 65535, "quant_fp8_per_block", "w has ", w.shape(0), " rows; ", w.device(),
        " takes at most 65535 x 128");
  const cuda::Kernel& k = device_kernel(quant_program(), "sol_quant_per_block_" + dtype_code(w), w.device());
  const void* wp = w.device_data();
  long long w_stride = w.stride(0), rows = w.shape(0);
  int w_vec = rows_aligned16(w);
  void* args[] = {&wp, &w_stride, &w_vec, &rows, &out};
  cuda::LaunchShape shape;
  shape.grid = {unsigned(w.shape(1) / 128), unsigned(block_rows), 1};
  shape.block = {256, 1, 1};
  cuda::launch(k, shape, current_stream(w.device()), args);
}

}  // namespace sol
