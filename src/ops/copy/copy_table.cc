#include "ops/copy/copy_table.h"

#include "ops/common/validate.h"
#include "sol/device.h"

namespace sol {

namespace {
// The CUDA entries where this build has the backend; null otherwise (copy_entry says why).
#ifdef SOL_HAS_CUDA
constexpr CopyEntry kCopyCuda = copy_cuda, kCastCuda = cast_cuda;
#else
constexpr CopyEntry kCopyCuda = nullptr, kCastCuda = nullptr;
#endif
}  // namespace

const CopyTable& copy_table() {
  static const CopyTable t{copy_cpu, kCopyCuda};
  return t;
}

const CopyTable& cast_table() {
  static const CopyTable t{cast_cpu, kCastCuda};
  return t;
}

CopyEntry copy_entry(const CopyTable& table, const char* op, const Tensor& src, const Tensor& dst) {
  require_same_device(op, "src", src, "dst", dst);
  const CopyEntry e = table.for_device(src.device().type);
  check(e != nullptr, op, "src and dst are on ", src.device(), " but ", cuda_discovery().reason);
  return e;
}

}  // namespace sol
