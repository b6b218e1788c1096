#include "sol/softmax.h"

#include <memory>

#include "kernels/softmax.h"
#include "hw/kernel_select.h"
#include "core/parallel.h"
#include "hw/streaming.h"
#include "sol/tuning.h"
#include "ops/common/validate.h"
#include "ops/softmax/softmax_backends.h"
#include "sol/error.h"

namespace sol {

const OpBackends<SoftmaxEntry>& softmax_backends() {
  static const OpBackends<SoftmaxEntry> b{softmax_cpu, SOL_CUDA_ENTRY(softmax_cuda)};
  return b;
}

void softmax(const Tensor& x, const Tensor& y) {
  const char* op = "softmax";
  check(x.ndim() >= 1, op, "x must have at least one dimension");
  require_same_shape(op, "x", x, "y", y);
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"x", &x}, {"y", &y}}) {
    check(t->dtype() == DType::f32 || t->dtype() == DType::bf16, op, name, ".dtype = ", dtype_name(t->dtype()),
          " but must be f32 or bf16");
    check(t->is_contiguous(), op, name, " must be contiguous, got strides of ", t->describe());
  }
  require_in_place_or_no_overlap(op, "x", x, "y", y);
  backend_entry(softmax_backends(), op, x.device())(x, y);
}

void softmax_cpu(const Tensor& x, const Tensor& y) {
  const int64_t n = x.shape(-1);
  if (x.numel() == 0) return;
  const int64_t rows = x.numel() / n;
  const int64_t xs = n * int64_t(dtype_size(x.dtype())), ys = n * int64_t(dtype_size(y.dtype()));
  // In place, y's lines were just read: streaming them out gains nothing.
  const bool stream = x.data() != y.data() && should_stream(y.numel() * int64_t(dtype_size(y.dtype())));
  // Out of place, the AVX-512 kernels pipeline a thread's rows (the read stream, the
  // arithmetic and the write stream of neighbouring rows at once; docs/perf/layer-ops.md).
  // Decode-sized ranges (16 rows, hot in L2) ran slower that way, and in place keeps one row per call too. How many rows a thread
  // needs is the tuning context's softmax_pipeline_min_rows.
  const TuningParams& tp = tuning().params;  // read once per call
  const int64_t min_pipelined_rows = tp.softmax_pipeline_min_rows;
  const kernels::SoftmaxKernels& k = select_kernels(kernels::softmax_kernel_table(), "softmax");
  const bool pipelined = x.data() != y.data();
  const char* xp = x.data_as<const char>();
  char* yp = y.data_as<char>();
  if (k.f32_row && x.dtype() == DType::f32) {
    // f32 rows: two passes and no scratch (kernels/softmax.h: their scratch rows
    // did not fit L1 beside the rows, and the three-pass kernel ran at compute + memory time).
    // Pipelined from two rows on: with nothing to keep in L1 between the passes, decode-sized
    // ranges gain too (cold, 8 and 16 rows).
    parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
      const float* xr = reinterpret_cast<const float*>(xp + r0 * xs);
      if (pipelined && r1 - r0 >= 2) {
        k.f32_rows(xr, xs, yp + r0 * ys, ys, y.dtype(), r1 - r0, n, stream, tp);
        return;
      }
      for (int64_t r = r0; r < r1; ++r)
        k.f32_row(reinterpret_cast<const float*>(xp + r * xs), yp + r * ys, y.dtype(), n, stream, tp);
    });
    return;
  }
  parallel_ranges(rows, 1, [&](int64_t r0, int64_t r1) {
    if (k.bf16_rows && pipelined && r1 - r0 >= min_pipelined_rows) {
      // once per thread, left uninitialised (every element is written before it is read)
      const auto scratch = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(2 * n));
      k.bf16_rows(reinterpret_cast<const uint16_t*>(xp + r0 * xs), xs, yp + r0 * ys, ys, y.dtype(), r1 - r0, n,
                  scratch.get(), stream, tp);
      return;
    }
    const auto scratch = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(n));  // once per thread
    for (int64_t r = r0; r < r1; ++r) {
      if (k.bf16_row)
        k.bf16_row(reinterpret_cast<const uint16_t*>(xp + r * xs), yp + r * ys, y.dtype(), n, scratch.get(), stream, tp);
      else
        k.row(xp + r * xs, x.dtype(), yp + r * ys, y.dtype(), n, scratch.get(), stream, tp);
    }
  });
}

}  // namespace sol
