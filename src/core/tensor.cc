#include "sol/tensor.h"

#include <sstream>

#include "sol/error.h"

namespace sol {

namespace {
void check_shape(std::span<const int64_t> shape, const char* what) {
  check(shape.size() <= size_t(kMaxDims), what, "ndim = ", shape.size(), " but at most ", kMaxDims,
        " dims are supported");
  for (size_t d = 0; d < shape.size(); ++d)
    check(shape[d] >= 0, what, "shape[", d, "] = ", shape[d], " but sizes must be >= 0");
}
}  // namespace

std::string Device::name() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.name(); }

void Tensor::throw_not_on_host() const {
  fail("Tensor::data", "this ", shape_string(), " ", dtype_name(dtype_), " tensor lives on ", device_.name(),
       " and host code cannot read device memory (the op has no path for ", device_.name(),
       " tensors; sol::transfer moves a tensor to the host)");
}

void Tensor::throw_misaligned_on(Device d) const {
  fail("Tensor::on", "this ", shape_string(), " ", dtype_name(dtype_), " tensor starts at ", data_, ", not a multiple of ",
       dtype_size(dtype_), " bytes, and device kernels read ", d.name(), " memory in whole elements");
}

Tensor::Tensor(void* data, DType dtype, std::span<const int64_t> shape)
    : data_(data), dtype_(dtype), ndim_(int(shape.size())) {
  check_shape(shape, "Tensor");
  int64_t stride = 1;
  for (int d = ndim_ - 1; d >= 0; --d) {
    shape_[d] = shape[d];
    strides_[d] = stride;
    stride *= shape[d];
  }
}

Tensor::Tensor(void* data, DType dtype, std::span<const int64_t> shape,
               std::span<const int64_t> strides)
    : data_(data), dtype_(dtype), ndim_(int(shape.size())) {
  check_shape(shape, "Tensor");
  check(strides.size() == shape.size(), "Tensor", "strides has ", strides.size(),
        " entries but shape has ", shape.size());
  for (int d = 0; d < ndim_; ++d) {
    check(strides[d] >= 0, "Tensor", "strides[", d, "] = ", strides[d], " but must be >= 0");
    shape_[d] = shape[d];
    strides_[d] = strides[d];
  }
}

int Tensor::axis(int d) const {
  int a = d < 0 ? d + ndim_ : d;
  check(a >= 0 && a < ndim_, "Tensor", "dim ", d, " out of range for a ", ndim_, "-d tensor");
  return a;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim_; ++d) n *= shape_[d];
  return n;
}

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (int d = ndim_ - 1; d >= 0; --d) {
    // A dimension of size 1 may carry any stride without breaking density.
    if (shape_[d] != 1 && strides_[d] != expect) return false;
    expect *= shape_[d];
  }
  return true;
}

int64_t Tensor::offset_of(std::span<const int64_t> index) const {
  check(int(index.size()) == ndim_, "Tensor", "index has ", index.size(), " entries but tensor has ",
        ndim_, " dims");
  int64_t off = 0;
  for (int d = 0; d < ndim_; ++d) {
    check(index[d] >= 0 && index[d] < shape_[d], "Tensor", "index[", d, "] = ", index[d],
          " out of range [0, ", shape_[d], ")");
    off += index[d] * strides_[d];
  }
  return off * int64_t(dtype_size(dtype_));
}

void* Tensor::ptr(std::initializer_list<int64_t> index) const {
  return static_cast<char*>(data()) + offset_of({index.begin(), index.size()});
}

Tensor Tensor::slice(int d, int64_t start, int64_t stop) const {
  int a = axis(d);
  check(0 <= start && start <= stop && stop <= shape_[a], "Tensor::slice", "range [", start, ", ",
        stop, ") not within [0, ", shape_[a], "] along dim ", d);
  Tensor t = *this;
  t.shape_[a] = stop - start;
  t.data_ = static_cast<char*>(data_) + start * strides_[a] * int64_t(dtype_size(dtype_));
  return t;
}

Tensor Tensor::reshape(std::span<const int64_t> shape) const {
  check(is_contiguous(), "Tensor::reshape", "tensor ", describe(), " is not contiguous");
  Tensor t(data_, dtype_, shape);
  t.device_ = device_;
  check(t.numel() == numel(), "Tensor::reshape", "new shape ", t.shape_string(), " has ",
        t.numel(), " elements but tensor has ", numel());
  return t;
}

std::ostream& operator<<(std::ostream& os, ShapeText s) {
  os << '[';
  for (int d = 0; d < s.t.ndim(); ++d) os << (d ? ", " : "") << s.t.shape(d);
  return os << ']';
}

std::string Tensor::shape_string() const {
  std::ostringstream os;
  os << shape_text(*this);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, DescribeText d) {
  os << shape_text(d.t) << ' ' << dtype_name(d.t.dtype());
  return d.t.device().is_cpu() ? os : os << " on " << d.t.device();
}

std::string Tensor::describe() const {
  std::string s = shape_string() + " " + std::string(dtype_name(dtype_));
  return device_.is_cpu() ? s : s + " on " + device_.name();
}

}  // namespace sol
