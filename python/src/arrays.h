#pragma once
// Python arrays as sol::Tensor views, without copies.
//
// Anything nanobind's nb::ndarray imports (DLPack: torch, jax, cupy-on-host...; the buffer
// protocol: numpy) becomes a Tensor over the same memory, strides included (ops validate what
// they accept). numpy arrays of ml_dtypes' bfloat16 / float8_e4m3fn / float8_e5m2 speak neither
// protocol, so they are viewed as uint16 / uint8 of the same memory first and tagged with the
// Sol dtype. Arrays on a CUDA device (DLPack kDLCUDA) become cuda:N tensors; a torch tensor's
// current stream becomes Sol's for that device. Outputs the caller does not pass are allocated
// as numpy arrays (by torch, on the inputs' device, when the inputs are torch tensors).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sol/error.h"
#include "sol/tensor.h"

namespace solpy {

namespace nb = nanobind;

// A dtype problem found by the bindings; raised as sol.DTypeError (a ValueError and a TypeError).
class DTypeError : public sol::Error {
 public:
  explicit DTypeError(const std::string& what) : sol::Error(what) {}
};

// One array argument: the object the caller gave (returned as-is for outputs), the imported
// ndarray that keeps the memory alive, and the Tensor view of it.
struct Array {
  nb::object object;
  nb::ndarray<nb::ro> imported;   // inputs
  nb::ndarray<> imported_rw;      // outputs: the producer allows writes
  sol::Tensor tensor;

  const sol::Tensor& operator*() const { return tensor; }
  const sol::Tensor* operator->() const { return &tensor; }
  // Size of dimension d, or 0 when the array has no such dimension (the op's own validation
  // then names the problem; shapes computed from it are only used to allocate outputs).
  int64_t dim(int d) const;
};

// Inputs: read-only access is enough. Outputs: the array must be writable.
Array input(nb::handle obj, const char* op, const char* name);
Array output(nb::handle obj, const char* op, const char* name);
// An input that may be None.
std::optional<Array> optional_input(nb::handle obj, const char* op, const char* name);
inline const sol::Tensor* ptr(const std::optional<Array>& a) { return a ? &a->tensor : nullptr; }

// `out` when given (must be writable; the op checks its shape and dtype), else a new array of
// this shape and dtype: uninitialised, or zeroed for ops that leave some of it untouched. The new
// array is numpy's, or, while an output allocator is set on this thread (sol's Python layer sets
// one when an op's inputs are torch tensors), whatever that allocator returns.
enum class Fill { none, zeros };
Array output_or_new(nb::handle out, const char* op, const char* name, std::vector<int64_t> shape,
                    sol::DType dtype, Fill fill = Fill::none);

// The output allocator of this thread: a callable (shape: tuple, dtype: Sol name, zeros: bool)
// returning a writable array, or None for numpy. Setting returns the one it replaces.
nb::object set_output_allocator(nb::handle allocator);

// str(obj), as Python prints it.
std::string to_string(nb::handle obj);

// A dtype argument: a Sol name ("bf16", "f8e4m3"), a numpy / ml_dtypes name ("bfloat16",
// "float8_e4m3fn") or dtype object, or a torch dtype.
sol::DType dtype_arg(nb::handle obj, const char* op, const char* name);
// The numpy dtype object for a Sol dtype (ml_dtypes for bf16 and fp8).
nb::object numpy_dtype(sol::DType dtype);

// Runs an op with the GIL released: other Python threads run while Sol computes.
template <class F>
void released(F&& f) {
  nb::gil_scoped_release unlocked;
  f();
}

// Maps a string option onto an enum value; throws sol::Error "op: name = 'x' but must be one of a, b".
template <class E>
E choice(const std::string& value, const char* op, const char* name,
         std::initializer_list<std::pair<const char*, E>> options) {
  std::string known;
  for (const auto& [text, e] : options) {
    if (value == text) return e;
    known += known.empty() ? text : std::string(", ") + text;
  }
  sol::fail(op, name, " = '", value, "' but must be one of ", known);
}

}  // namespace solpy
