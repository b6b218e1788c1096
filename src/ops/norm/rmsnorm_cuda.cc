// The RMSNorm ops' CUDA entries (src/kernels/cuda/rmsnorm.cuh): one CTA per row, the row staged in
// shared memory. Outputs are the CPU path's bit for bit (NaN payloads aside): the statistics
// follow its summation order, every other step rounds as it does.
#include "ops/norm/norm_backends.h"
#include "ops/quant/device_rows_cuda.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

const cuda::CudaProgram& rmsnorm_program() {
  static const cuda::CudaProgram p{"sol_rmsnorm", "#include \"kernels/cuda/rmsnorm_kernels.cuh\"\n", {}};
  return p;
}

namespace {

// One 256-thread CTA per row, the row (h elements of `staged`) in dynamic shared memory.
cuda::LaunchShape row_shape(const char* op, const Tensor& x, DType staged) {
  const int64_t rows = x.shape(0), h = x.shape(1);
  const int64_t bytes = (h * int64_t(dtype_size(staged)) + 15) / 16 * 16;
  const int64_t limit = cuda_device(x.device().index).max_shared_per_block;
  if (bytes > limit)
    fail(op, "a row of ", h, " ", dtype_name(staged), " needs ", bytes, " bytes of shared memory; ", x.device(),
         " has ", limit, " per block");
  check(rows <= 0x7fffffff, op, x.shape(0), " rows is more than one launch takes");
  cuda::LaunchShape s;
  s.grid = {unsigned(rows), 1, 1};
  s.block = {256, 1, 1};
  s.dynamic_shared_bytes = size_t(bytes);
  return s;
}

int aligned_flags(bool rows, bool out, const Tensor& weight) {
  return (rows ? 1 : 0) | (out ? 2 : 0) | (rows_aligned16(weight) ? 4 : 0);
}

}  // namespace

void rmsnorm_cuda(const Tensor& x, const Tensor& weight, const Tensor& y, const NormOptions& opt) {
  if (x.empty()) return;
  const cuda::LaunchShape shape = row_shape("rmsnorm", x, x.dtype());
  const cuda::Kernel& k = device_kernel(
      rmsnorm_program(), "sol_rmsnorm_" + dtype_code(x) + "_" + dtype_code(weight) + "_" + dtype_code(y), x.device());
  const void* xp = x.device_data();
  void* yp = y.device_data();
  const void* wp = weight.device_data();
  long long x_stride = x.stride(0), y_stride = y.stride(0), h = x.shape(1);
  float eps = opt.eps;
  int flags = aligned_flags(rows_aligned16(x), rows_aligned16(y), weight);
  void* args[] = {&xp, &x_stride, &yp, &y_stride, &wp, &h, &eps, &flags};
  cuda::launch(k, shape, current_stream(x.device()), args);
}

void add_rmsnorm_cuda(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& y,
                      const NormOptions& opt) {
  if (x.empty()) return;
  const cuda::LaunchShape shape = row_shape("add_rmsnorm", x, residual.dtype());
  const cuda::Kernel& k = device_kernel(rmsnorm_program(),
                                        "sol_add_rmsnorm_" + dtype_code(x) + "_" + dtype_code(residual) + "_" +
                                            dtype_code(weight) + "_" + dtype_code(y),
                                        x.device());
  const void* xp = x.device_data();
  void* rp = residual.device_data();
  void* yp = y.device_data();
  const void* wp = weight.device_data();
  long long x_stride = x.stride(0), r_stride = residual.stride(0), y_stride = y.stride(0), h = x.shape(1);
  float eps = opt.eps;
  int flags = aligned_flags(rows_aligned16(x) && rows_aligned16(residual), rows_aligned16(y), weight);
  void* args[] = {&xp, &x_stride, &rp, &r_stride, &yp, &y_stride, &wp, &h, &eps, &flags};
  cuda::launch(k, shape, current_stream(x.device()), args);
}

void rmsnorm_quant_fp8_cuda(const Tensor& x, const Tensor& weight, const Tensor& q, const Tensor& scales,
                            const NormOptions& opt, const QuantOptions& qopt) {
  sol_cuda::QuantOut out = per_token_out("rmsnorm_quant_fp8", q, scales, qopt);
  if (x.empty()) return;
  const cuda::LaunchShape shape = row_shape("rmsnorm_quant_fp8", x, x.dtype());
  const cuda::Kernel& k =
      device_kernel(rmsnorm_program(), "sol_rmsnorm_quant_" + dtype_code(x) + "_" + dtype_code(weight), x.device());
  const void* xp = x.device_data();
  const void* wp = weight.device_data();
  long long x_stride = x.stride(0), h = x.shape(1);
  float eps = opt.eps;
  int flags = aligned_flags(rows_aligned16(x), false, weight);
  void* args[] = {&xp, &x_stride, &wp, &h, &eps, &flags, &out};
  cuda::launch(k, shape, current_stream(x.device()), args);
}

}  // namespace sol
