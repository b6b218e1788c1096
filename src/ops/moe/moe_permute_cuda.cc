// moe_permute's and moe_unpermute's CUDA entries (src/kernels/cuda/moe_rows.cuh). Permute's
// routing is copied to the host and checked there, and its plan is the CPU's own
// (moe_permute_plan), uploaded from pinned memory without a further wait: the same rows in the
// same order, bit for bit, at one synchronisation per call. Unpermute's row_of is read back and checked on the host while the
// kernel runs (cuda::IndexReadback; the kernel skips a choice outside y_perm), and it sums with
// the CPU's AVX-512 order and FMAs (the same bits).
#include <algorithm>
#include <string>
#include <vector>

#include "device/cuda/index_readback.h"
#include "ops/moe/moe_backends.h"
#include "ops/moe/moe_rows_program.h"
#include "sol/device.h"

namespace sol {

const cuda::CudaProgram& moe_rows_program() {
  static const cuda::CudaProgram p = [] {
    cuda::CudaProgram program;
    program.name = "sol_moe_rows";
    program.source = "#include \"kernels/cuda/moe_rows.cuh\"\n";
    for (const char* in : {"false", "true"})
      for (const char* out : {"false", "true"})
        for (const char* vec : {"false", "true"})
          program.source += std::string("SOL_CUDA_UNPERMUTE_KERNEL(") + in + ", " + out + ", " + vec + ")\n";
    return program;
  }();
  return p;
}

cuda::LaunchShape row_blocks(Device device, int64_t rows) {
  cuda::LaunchShape s;
  s.block[0] = 256;
  s.grid[0] = unsigned(std::clamp<int64_t>(rows, 1, 16LL * cuda_device(device.index).sm_count));
  return s;
}

void moe_permute_cuda(const Tensor& x, const Tensor& idx, int64_t experts, int64_t alignment, const Tensor& x_perm,
                      const Tensor& grouped_layout, const Tensor& row_of) {
  const Buffer host_idx = moe_routing_on_host("moe_permute", idx);
  // The plan is written straight into pinned memory and uploaded without a synchronisation.
  cuda::IndexUpload ro("moe_permute", x.device(), size_t(row_of.nbytes())),
      gl("moe_permute", x.device(), size_t(grouped_layout.nbytes()));
  const int64_t rows = moe_permute_plan(x, host_idx.tensor(), experts, alignment, x_perm, grouped_layout, row_of,
                                        static_cast<int32_t*>(ro.host()), static_cast<int32_t*>(gl.host()));
  const int64_t tokens = idx.shape(0);
  long long k = idx.shape(1), n_tokens = tokens, n_rows = rows;
  long long row_bytes = x.shape(1) * int64_t(dtype_size(x.dtype()));
  void* stream = current_stream(x.device());
  ro.upload(row_of, stream);
  gl.upload(grouped_layout, stream);
  if (rows == 0 || row_bytes == 0) return;
  int vectors = row_bytes % 16 == 0 &&
                (reinterpret_cast<uintptr_t>(x.device_data()) | reinterpret_cast<uintptr_t>(x_perm.device_data())) % 16 == 0;
  const void* xp = x.device_data();
  const void* rop = row_of.device_data();
  const void* glp = grouped_layout.device_data();
  void* pp = x_perm.device_data();
  int kk = int(k);
  void* copy_args[] = {&xp, &rop, &kk, &n_tokens, &row_bytes, &pp, &vectors};
  if (tokens) cuda::launch(cuda::get_kernel(moe_rows_program(), "sol_permute_rows", x.device()),
                           row_blocks(x.device(), tokens), stream, copy_args);
  void* zero_args[] = {&pp, &glp, &n_rows, &row_bytes, &vectors};
  cuda::launch(cuda::get_kernel(moe_rows_program(), "sol_zero_padding_rows", x.device()), row_blocks(x.device(), rows),
               stream, zero_args);
}

namespace {

void launch_unpermute(const Tensor& y_perm, const Tensor& row_of, const Tensor& w, const Tensor& out, void* stream) {
  const int64_t tokens = row_of.shape(0), k = row_of.shape(1);
  long long rows = y_perm.shape(0), h = y_perm.shape(1), n_tokens = tokens;
  int kk = int(k);
  const bool vec = h % 8 == 0 && (reinterpret_cast<uintptr_t>(y_perm.device_data()) |
                                  reinterpret_cast<uintptr_t>(out.device_data())) % 16 == 0;
  const auto flag = [](bool b) { return b ? "true" : "false"; };
  const std::string name = std::string("sol_unpermute_") + flag(y_perm.dtype() == DType::bf16) + "_" +
                           flag(out.dtype() == DType::bf16) + "_" + flag(vec);
  const void* yp = y_perm.device_data();
  const void* rop = row_of.device_data();
  const void* wp = w.device_data();
  void* op = out.device_data();
  void* args[] = {&yp, &rows, &rop, &wp, &kk, &n_tokens, &h, &op};
  cuda::launch(cuda::get_kernel(moe_rows_program(), name.c_str(), out.device()), row_blocks(out.device(), tokens),
               stream, args);
}

}  // namespace

void moe_unpermute_cuda(const Tensor& y_perm, const Tensor& row_of, const Tensor& w, const Tensor& out) {
  void* stream = current_stream(out.device());
  cuda::IndexReadback host_rows("moe_unpermute", row_of, stream);
  if (out.numel() != 0) launch_unpermute(y_perm, row_of, w, out, stream);
  moe_unpermute_check_rows(static_cast<const int32_t*>(host_rows.wait()), row_of.shape(0), row_of.shape(1),
                           y_perm.shape(0));
}

}  // namespace sol
