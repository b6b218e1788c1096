#include <sys/mman.h>

#include <cstdlib>
#include <utility>

#include "sol/error.h"
#include "sol/tensor.h"

namespace sol {

namespace {
constexpr size_t kHugeThreshold = size_t(2) << 20;

int64_t checked_bytes(DType dtype, std::span<const int64_t> shape) {
  int64_t n = int64_t(dtype_size(dtype));
  for (size_t d = 0; d < shape.size(); ++d) {
    check(shape[d] >= 0, "Buffer", "shape[", d, "] = ", shape[d], " but sizes must be >= 0");
    check(shape[d] == 0 || n <= INT64_MAX / shape[d], "Buffer", "size of shape overflows 64 bits");
    n *= shape[d];
  }
  return n;
}
}  // namespace

Buffer::Buffer(size_t bytes) : bytes_(bytes) {
  // Large buffers: page-aligned so THP can back them; the advice is a hint, failure is harmless.
  size_t align = bytes >= kHugeThreshold ? 4096 : 64;
  size_t rounded = (bytes + align - 1) / align * align;
  if (rounded == 0) rounded = align;
  data_ = std::aligned_alloc(align, rounded);
  if (!data_) fail("Buffer", "cannot allocate ", bytes, " bytes");
  if (bytes >= kHugeThreshold) madvise(data_, rounded, MADV_HUGEPAGE);
  int64_t n = int64_t(bytes);
  view_ = Tensor(data_, DType::i8, {n});
}

Buffer::Buffer(DType dtype, std::span<const int64_t> shape)
    : Buffer(size_t(checked_bytes(dtype, shape))) {
  view_ = Tensor(data_, dtype, shape);
}

Buffer::Buffer(DType dtype, std::initializer_list<int64_t> shape)
    : Buffer(dtype, std::span<const int64_t>(shape.begin(), shape.size())) {}

Buffer::~Buffer() { std::free(data_); }

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), view_(o.view_) {
  o.view_ = Tensor();
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    view_ = o.view_;
    o.view_ = Tensor();
  }
  return *this;
}

}  // namespace sol
