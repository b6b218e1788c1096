#pragma once
// Argument checks shared by ops; each throws sol::Error naming the op and the argument.
#include <algorithm>
#include <cstdint>

#include "sol/error.h"
#include "sol/tensor.h"

namespace sol {

inline void require_same_device(const char* op, const char* a_name, const Tensor& a,
                                const char* b_name, const Tensor& b) {
  check(a.device() == b.device(), op, a_name, " is on ", a.device(), " but ", b_name, " is on ",
        b.device(), " (operands must share a device; sol::transfer moves a tensor)");
}

// Operands of one shape are operands of one op: they must also share a device.
inline void require_same_shape(const char* op, const char* a_name, const Tensor& a,
                               const char* b_name, const Tensor& b) {
  bool same = a.ndim() == b.ndim() && std::equal(a.shape().begin(), a.shape().end(), b.shape().begin());
  check(same, op, a_name, ".shape = ", shape_text(a), " but ", b_name, ".shape = ",
        shape_text(b));
  require_same_device(op, a_name, a, b_name, b);
}

// A CPU path given a device tensor: named here, before anything reads its memory (Tensor::data
// throws too, for paths that skip this check, but cannot name the op).
inline void require_host(const char* op, const char* name, const Tensor& t) {
  check(t.device().is_cpu(), op, name, " is on ", t.device(), " but this op runs on the cpu only");
}

inline void require_data(const char* op, const char* name, const Tensor& t) {
  require_host(op, name, t);
  check(t.empty() || t.data() != nullptr, op, name, " has ", t.numel(), " elements but no data");
}

// Byte range [lo, hi) that a view can touch.
inline void byte_extent(const Tensor& t, uintptr_t& lo, uintptr_t& hi) {
  int64_t last = 0;
  for (int d = 0; d < t.ndim(); ++d) last += (t.shape(d) - 1) * t.stride(d);
  lo = reinterpret_cast<uintptr_t>(t.device_data());
  hi = lo + uintptr_t((last + 1) * int64_t(dtype_size(t.dtype())));
}

inline void require_no_overlap(const char* op, const char* a_name, const Tensor& a,
                               const char* b_name, const Tensor& b) {
  if (a.empty() || b.empty()) return;
  require_same_device(op, a_name, a, b_name, b);
  uintptr_t a0, a1, b0, b1;
  byte_extent(a, a0, a1);
  byte_extent(b, b0, b1);
  check(a1 <= b0 || b1 <= a0, op, a_name, " and ", b_name, " overlap in memory");
}

// For ops that may run in place: y is x itself (same start, dtype and strides: each element
// is read before it is written, by the thread that writes it), or y does not overlap x. A y
// at x's address with another dtype or other strides puts one row's output over other rows'
// input, which other threads read.
inline void require_in_place_or_no_overlap(const char* op, const char* x_name, const Tensor& x,
                                           const char* y_name, const Tensor& y) {
  if (x.empty() || y.empty() || x.device_data() != y.device_data())
    return require_no_overlap(op, x_name, x, y_name, y);
  bool same_strides = x.ndim() == y.ndim();
  for (int d = 0; same_strides && d < x.ndim(); ++d)  // a size-1 dimension's stride is never used
    same_strides = x.shape(d) == 1 || x.stride(d) == y.stride(d);
  check(x.dtype() == y.dtype() && same_strides, op, y_name, " starts where ", x_name, " does, but in place needs ",
        y_name, " to be ", x_name, " itself (same dtype and strides): ", x_name, " is ", x.describe(), ", ", y_name,
        " is ", y.describe());
}

}  // namespace sol
