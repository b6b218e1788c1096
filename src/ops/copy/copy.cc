#include "sol/copy.h"

#include <cstring>
#include <vector>

#include "ops/common/copy_bytes.h"
#include "core/parallel.h"
#include "hw/streaming.h"
#include "ops/copy/copy_table.h"
#include "ops/common/validate.h"
#include "sol/hw.h"

namespace sol {

namespace {

void copy_contiguous(char* dst, const char* src, int64_t bytes) {
  Isa isa = active_isa();
  bool stream = should_stream(bytes);
  // Pieces start on 4 KiB boundaries so threads never share a page or a cache line.
  parallel_ranges(bytes, 4096, [&](int64_t b, int64_t e) {
    copy_bytes(isa, dst + b, src + b, e - b, stream);
  });
}

// Any strides: walk the index space; the innermost dimension copies element by element.
void copy_strided(const Tensor& src, const Tensor& dst) {
  const int nd = src.ndim();
  const size_t es = dtype_size(src.dtype());
  const int64_t inner = nd ? src.shape(nd - 1) : 1;
  const int64_t outer = inner ? src.numel() / inner : 0;
  const int64_t ss = nd ? src.stride(nd - 1) : 0, ds = nd ? dst.stride(nd - 1) : 0;
  parallel_ranges(outer, 1, [&](int64_t b, int64_t e) {
    std::vector<int64_t> idx(size_t(nd > 0 ? nd - 1 : 0));
    for (int64_t row = b; row < e; ++row) {
      int64_t r = row, so = 0, dof = 0;
      for (int d = nd - 2; d >= 0; --d) {
        int64_t i = r % src.shape(d);
        r /= src.shape(d);
        so += i * src.stride(d);
        dof += i * dst.stride(d);
      }
      const char* s = src.data_as<const char>() + so * int64_t(es);
      char* o = dst.data_as<char>() + dof * int64_t(es);
      for (int64_t j = 0; j < inner; ++j) std::memcpy(o + j * ds * int64_t(es), s + j * ss * int64_t(es), es);
    }
  });
}

}  // namespace

void copy(const Tensor& src, const Tensor& dst) {
  require_same_shape("copy", "src", src, "dst", dst);
  check(src.dtype() == dst.dtype(), "copy", "src.dtype = ", dtype_name(src.dtype()),
        " but dst.dtype = ", dtype_name(dst.dtype()), " (use sol::cast to convert)");
  copy_entry(copy_backends(), "copy", src, dst)(src, dst);
}

void copy_cpu(const Tensor& src, const Tensor& dst) {
  require_data("copy", "src", src);
  require_data("copy", "dst", dst);
  if (src.empty()) return;
  require_no_overlap("copy", "src", src, "dst", dst);
  for (int d = 0; d < dst.ndim(); ++d)
    check(dst.shape(d) == 1 || dst.stride(d) != 0, "copy", "dst.strides[", d,
          "] = 0 would write several elements to one place");
  if (src.is_contiguous() && dst.is_contiguous())
    copy_contiguous(dst.data_as<char>(), src.data_as<const char>(), src.nbytes());
  else
    copy_strided(src, dst);
}

}  // namespace sol
