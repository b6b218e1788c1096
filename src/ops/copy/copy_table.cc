#include "ops/copy/copy_table.h"

#include "ops/common/validate.h"
#include "sol/device.h"

namespace sol {

const CopyTable& copy_table() {
#ifdef SOL_HAS_CUDA
  static const CopyTable t{copy_cpu, copy_cuda};
#else
  static const CopyTable t{copy_cpu, nullptr};
#endif
  return t;
}

const CopyTable& cast_table() {
#ifdef SOL_HAS_CUDA
  static const CopyTable t{cast_cpu, cast_cuda};
#else
  static const CopyTable t{cast_cpu, nullptr};
#endif
  return t;
}

CopyEntry copy_entry(const CopyTable& table, const char* op, const Tensor& src, const Tensor& dst) {
  require_same_device(op, "src", src, "dst", dst);
  const CopyEntry e = table.for_device(src.device().type);
  check(e != nullptr, op, "src and dst are on ", src.device(), " but ", cuda_discovery().reason);
  return e;
}

}  // namespace sol
