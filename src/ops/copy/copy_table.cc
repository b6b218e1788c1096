#include "ops/copy/copy_table.h"

#include "ops/common/validate.h"

namespace sol {

const OpBackends<CopyEntry>& copy_backends() {
  static const OpBackends<CopyEntry> b{copy_cpu, SOL_CUDA_ENTRY(copy_cuda)};
  return b;
}

const OpBackends<CopyEntry>& cast_backends() {
  static const OpBackends<CopyEntry> b{cast_cpu, SOL_CUDA_ENTRY(cast_cuda)};
  return b;
}

CopyEntry copy_entry(const OpBackends<CopyEntry>& backends, const char* op, const Tensor& src, const Tensor& dst) {
  require_same_device(op, "src", src, "dst", dst);
  return backend_entry(backends, op, src.device());
}

}  // namespace sol
