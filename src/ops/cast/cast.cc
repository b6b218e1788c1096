#include <string>

#include "kernels/convert.h"
#include "core/parallel.h"
#include "hw/streaming.h"
#include "ops/copy/copy_table.h"
#include "ops/common/validate.h"
#include "sol/copy.h"
#include "sol/hw.h"
#include "sol/tuning.h"

namespace sol {

void cast(const Tensor& src, const Tensor& dst) {
  require_same_shape("cast", "src", src, "dst", dst);
  check(kernels::convert_supported(src.dtype(), dst.dtype()), "cast", "cannot convert ",
        dtype_name(src.dtype()), " to ", dtype_name(dst.dtype()),
        " (supported: any pair of f32, bf16, f16, f8e4m3, f8e5m2)");
  check(src.is_contiguous(), "cast", "src ", describe_text(src), " must be contiguous");
  check(dst.is_contiguous(), "cast", "dst ", describe_text(dst), " must be contiguous");
  copy_entry(cast_backends(), "cast", src, dst)(src, dst);
}

void cast_cpu(const Tensor& src, const Tensor& dst) {
  require_data("cast", "src", src);
  require_data("cast", "dst", dst);
  if (src.empty()) return;
  require_no_overlap("cast", "src", src, "dst", dst);

  const DType from = src.dtype(), to = dst.dtype();
  const auto* s = src.data_as<const char>();
  auto* d = dst.data_as<char>();
  const int64_t si = int64_t(dtype_size(from)), di = int64_t(dtype_size(to));
  const Isa isa = active_isa();
  const bool stream = should_stream(dst.nbytes());
  // A streamed cast reads one array from memory, as the row passes do: their L1 look-ahead,
  // and one into L2 of its own.
  const TuningParams& tp = tuning().params;
  const int64_t ahead = tp.pass_prefetch_bytes, l2_ahead = tp.cast_l2_prefetch_bytes;
  // 1024-element pieces: every piece boundary is 64-byte aligned in both buffers whatever
  // the element sizes (1, 2 or 4 bytes), so only the first and last piece need peeling.
  parallel_ranges(src.numel(), 1024, [&](int64_t b, int64_t e) {
    const void* in = s + b * si;
    void* out = d + b * di;
    if (isa >= Isa::avx512) kernels::convert_avx512(in, from, out, to, e - b, stream, ahead, l2_ahead);
    else if (isa >= Isa::avx2) kernels::convert_avx2(in, from, out, to, e - b, stream, ahead);
    else kernels::convert_scalar(in, from, out, to, e - b);
  });
}

}  // namespace sol
