// sol::copy's CUDA entry: contiguous tensors on one device, 16-byte vectors per thread.
#include "ops/common/validate.h"
#include "ops/copy/copy_cast_cuda.h"
#include "ops/copy/copy_table.h"
#include "sol/device.h"

namespace sol {

void copy_cuda(const Tensor& src, const Tensor& dst) {
  check(src.is_contiguous() && dst.is_contiguous(), "copy", "src ", describe_text(src), " and dst ",
        describe_text(dst), " must be contiguous on ", src.device(), " (strided device copies are not supported yet)");
  if (src.empty()) return;
  check(src.device_data() && dst.device_data(), "copy", "src or dst has elements but no data");
  require_no_overlap("copy", "src", src, "dst", dst);
  static thread_local cuda::Kernel kernel;
  if (!kernel.function || kernel.device != src.device())
    kernel = cuda::get_kernel(copy_cast_program(), "sol_copy_bytes", src.device());
  const void* s = src.device_data();
  void* d = dst.device_data();
  long long bytes = src.nbytes();
  int vectors = vector_aligned(src, dst) ? 1 : 0;
  void* args[] = {&s, &d, &bytes, &vectors};
  cuda::launch(kernel, elementwise_shape(src.device(), vectors ? bytes / 16 : bytes), current_stream(src.device()),
               args);
}

}  // namespace sol
