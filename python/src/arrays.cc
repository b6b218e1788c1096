#include "arrays.h"

#include <nanobind/stl/string.h>

#include <algorithm>
#include <string_view>

#include "sol/device.h"
#include "sol/dtype.h"

namespace solpy {

namespace {

namespace dl = nb::dlpack;

// numpy and ml_dtypes names of Sol's dtypes. Looked up by Sol's own name through parse_dtype,
// so a build whose DType lacks one of them simply does not offer it.
struct DTypeName {
  const char* sol;
  const char* numpy;
  const char* module;  // where the numpy scalar type lives
};
constexpr DTypeName kNames[] = {
    {"f32", "float32", "numpy"},          {"f16", "float16", "numpy"},
    {"bf16", "bfloat16", "ml_dtypes"},    {"f8e4m3", "float8_e4m3fn", "ml_dtypes"},
    {"f8e5m2", "float8_e5m2", "ml_dtypes"}, {"i8", "int8", "numpy"},
    {"i32", "int32", "numpy"},            {"u8", "uint8", "numpy"},
    {"i64", "int64", "numpy"},
};

std::optional<sol::DType> sol_dtype(std::string_view sol_name) {
  try {
    return sol::parse_dtype(sol_name);
  } catch (const sol::Error&) {
    return std::nullopt;
  }
}

std::string supported_names() {
  std::string s;
  for (const DTypeName& n : kNames)
    if (sol_dtype(n.sol)) s += (s.empty() ? "" : ", ") + std::string(n.numpy);
  return s;
}

// DLPack type code + bits -> Sol dtype name.
const char* dlpack_sol_name(dl::dtype t) {
  if (t.lanes != 1) return nullptr;
  switch (dl::dtype_code(t.code)) {
    case dl::dtype_code::Float: return t.bits == 32 ? "f32" : t.bits == 16 ? "f16" : nullptr;
    case dl::dtype_code::Bfloat: return t.bits == 16 ? "bf16" : nullptr;
    case dl::dtype_code::Int: return t.bits == 8 ? "i8" : t.bits == 32 ? "i32" : t.bits == 64 ? "i64" : nullptr;
    case dl::dtype_code::UInt: return t.bits == 8 ? "u8" : nullptr;
    case dl::dtype_code::Float8_E4M3FN: return t.bits == 8 ? "f8e4m3" : nullptr;
    case dl::dtype_code::Float8_E5M2: return t.bits == 8 ? "f8e5m2" : nullptr;
    default: return nullptr;
  }
}

std::string dlpack_name(dl::dtype t) {
  static const char* codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string base = t.code < 7 ? codes[t.code] : "dlpack_code" + std::to_string(t.code);
  return base + std::to_string(t.bits) + (t.lanes != 1 ? "x" + std::to_string(t.lanes) : "");
}

nb::object numpy_module() { return nb::module_::import_("numpy"); }

bool is_numpy_array(nb::handle obj) {
  // Kept for the life of the process (a static nb::object would be released after the
  // interpreter is gone).
  static PyObject* ndarray = nb::object(numpy_module().attr("ndarray")).release().ptr();
  int r = PyObject_IsInstance(obj.ptr(), ndarray);
  if (r < 0) nb::raise_python_error();
  return r == 1;
}

// ml_dtypes' element types are numpy user dtypes (dtype.num >= 256, no buffer or DLPack
// export). Returns the uint view of the same memory and the Sol dtype, or nothing when obj is
// not such an array.
std::optional<std::pair<nb::object, sol::DType>> ml_dtypes_view(nb::handle obj, const char* op,
                                                               const char* name) {
  if (!is_numpy_array(obj)) return std::nullopt;
  nb::object dtype = obj.attr("dtype");
  if (nb::cast<int>(dtype.attr("num")) < 256) return std::nullopt;
  std::string np_name = nb::cast<std::string>(dtype.attr("name"));
  for (const DTypeName& n : kNames) {
    if (np_name != n.numpy || std::string_view(n.module) != "ml_dtypes") continue;
    std::optional<sol::DType> dt = sol_dtype(n.sol);
    if (!dt) break;
    // The name alone could be any user dtype; it must be ml_dtypes' type of that name.
    nb::object ml = nb::module_::import_("ml_dtypes");
    if (!dtype.equal(numpy_module().attr("dtype")(ml.attr(n.numpy)))) break;
    const char* view = sol::dtype_size(*dt) == 2 ? "uint16" : "uint8";
    return std::make_pair(obj.attr("view")(numpy_module().attr(view)), *dt);
  }
  throw DTypeError(std::string(op) + ": " + name + ".dtype = " + np_name + " is not a Sol dtype (supported: " +
                   supported_names() + ")");
}

std::string type_of(nb::handle obj) { return nb::cast<std::string>(nb::type_name(obj.type())); }

[[noreturn]] void not_viewable(nb::handle obj, nb::handle source, const char* op, const char* name) {
  if (nb::hasattr(source, "__dlpack__") || nb::hasattr(source, "__array_interface__")) {
    // Let the producer say why (torch: "requires grad", numpy: an unsupported dtype...).
    std::string why = "it offers neither a DLPack capsule nor a buffer nanobind can read";
    if (nb::hasattr(source, "__dlpack__")) {
      try {
        source.attr("__dlpack__")();
      } catch (nb::python_error& e) {
        why = to_string(e.value());
      }
    }
    std::string dt = nb::hasattr(obj, "dtype") ? to_string(obj.attr("dtype")) : "?";
    throw DTypeError(std::string(op) + ": " + name + " (" + type_of(obj) + ", dtype " + dt +
                     ") cannot be viewed without a copy: " + why);
  }
  throw nb::type_error((std::string(op) + ": " + name + " must be an array (numpy, or anything with "
                        "__dlpack__ or the buffer protocol) but got " + type_of(obj)).c_str());
}

// Where an imported array lives: the host, or DLPack's kDLCUDA device N as cuda:N, which must be
// one this process sees (else sol::Error with discovery's reason).
sol::Device device_of(int device_type, int device_id, const char* op, const char* name) {
  if (device_type == nb::device::cpu::value) return sol::Device::cpu();
  if (device_type != nb::device::cuda::value)
    sol::fail(op, name, " lives on DLPack device type ", device_type,
              " but Sol takes host (CPU, type 1) or CUDA (type 2) memory");
  const sol::Device device = sol::Device::cuda(device_id);
  const sol::CudaDiscovery& found = sol::cuda_discovery();
  if (found.devices.empty()) sol::fail(op, name, " lives on ", device, " but there is no CUDA device: ", found.reason);
  sol::check(device_id >= 0 && device_id < int(found.devices.size()), op, name, " lives on ", device,
             " but this process sees ", found.devices.size(), " CUDA device(s)");
  return device;
}

// Sol's ops on a torch CUDA tensor enqueue on torch's current stream of its device, so they are
// ordered with the torch work around them as a torch op would be. torch's default stream is the
// legacy stream (handle 0), which the driver API names CU_STREAM_LEGACY (0x1). Other producers'
// arrays are synchronized by their __dlpack__ export and run on Sol's own stream.
void use_torch_stream(nb::handle obj, sol::Device device) {
  nb::object modules = nb::module_::import_("sys").attr("modules");
  if (!modules.attr("__contains__")("torch")) return;
  nb::object torch = modules["torch"];
  if (!nb::isinstance(obj, torch.attr("Tensor"))) return;
  const auto handle = nb::cast<uintptr_t>(torch.attr("cuda").attr("current_stream")(device.index).attr("cuda_stream"));
  sol::set_current_stream(device, reinterpret_cast<void*>(handle ? handle : uintptr_t(0x1)));
}

// The Tensor over an imported array: Sol's dtype, shape and strides (in elements), on the
// array's device.
template <class NdArray>
sol::Tensor view_of(const NdArray& nd, nb::handle obj, std::optional<sol::DType> tagged, const char* op,
                    const char* name) {
  const sol::Device device = device_of(nd.device_type(), nd.device_id(), op, name);
  sol::DType dtype;
  if (tagged) {
    dtype = *tagged;
  } else {
    const char* sol_name = dlpack_sol_name(nd.dtype());
    std::optional<sol::DType> dt = sol_name ? sol_dtype(sol_name) : std::nullopt;
    if (!dt) {
      std::string shown = nb::hasattr(obj, "dtype") ? to_string(obj.attr("dtype")) : dlpack_name(nd.dtype());
      throw DTypeError(std::string(op) + ": " + name + ".dtype = " + shown + " is not a Sol dtype (supported: " +
                       supported_names() + ")");
    }
    dtype = *dt;
  }
  const int ndim = int(nd.ndim());
  sol::check(ndim <= sol::kMaxDims, op, name, " has ", ndim, " dims but Sol takes at most ", sol::kMaxDims);
  std::vector<int64_t> shape(static_cast<size_t>(ndim)), strides(static_cast<size_t>(ndim));
  int64_t numel = 1;
  for (int d = 0; d < ndim; ++d) numel *= shape[size_t(d)] = int64_t(nd.shape(size_t(d)));
  // Row-major strides: what a producer without strides means, and what an empty array (no
  // element is ever addressed; producers disagree about its strides) gets.
  int64_t dense = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    strides[size_t(d)] = dense;
    dense *= shape[size_t(d)];
  }
  if (numel > 0 && nd.stride_ptr()) {
    for (int d = 0; d < ndim; ++d) {
      if (shape[size_t(d)] == 1) continue;  // never stepped along: any stride will do
      strides[size_t(d)] = nd.stride(size_t(d));
      sol::check(strides[size_t(d)] >= 0, op, name, " has stride ", strides[size_t(d)], " in dim ", d,
                 " but Sol takes non-negative strides only (pass a copy, e.g. numpy.ascontiguousarray)");
    }
  }
  const sol::Tensor t(const_cast<void*>(static_cast<const void*>(nd.data())), dtype, shape, strides);
  if (device.is_cpu()) return t;
  use_torch_stream(obj, device);
  return t.on(device);
}

Array import(nb::handle obj, const char* op, const char* name, bool writable) {
  if (obj.is_none()) sol::fail(op, name, " is None but an array is required");
  Array a;
  a.object = nb::borrow(obj);
  nb::object source = a.object;
  std::optional<sol::DType> tagged;
  if (auto view = ml_dtypes_view(obj, op, name)) {
    source = view->first;
    tagged = view->second;
  }
  if (writable && is_numpy_array(obj) && !nb::cast<bool>(obj.attr("flags").attr("writeable")))
    sol::fail(op, name, " is a read-only array but Sol writes its result there");
  if (writable) {
    if (!nb::try_cast(source, a.imported_rw, false)) {
      if (nb::try_cast(source, a.imported, false))
        sol::fail(op, name, " is read-only (its producer exports it so) but Sol writes its result there");
      not_viewable(obj, source, op, name);
    }
    a.tensor = view_of(a.imported_rw, obj, tagged, op, name);
  } else {
    if (!nb::try_cast(source, a.imported, false)) not_viewable(obj, source, op, name);
    a.tensor = view_of(a.imported, obj, tagged, op, name);
  }
  return a;
}

}  // namespace

std::string to_string(nb::handle obj) {
  nb::object text = nb::steal(PyObject_Str(obj.ptr()));
  if (!text.is_valid()) nb::raise_python_error();
  return nb::cast<std::string>(text);
}

int64_t Array::dim(int d) const {
  if (d < 0) d += tensor.ndim();
  return d >= 0 && d < tensor.ndim() ? tensor.shape(d) : 0;
}

Array input(nb::handle obj, const char* op, const char* name) { return import(obj, op, name, false); }

Array output(nb::handle obj, const char* op, const char* name) { return import(obj, op, name, true); }

std::optional<Array> optional_input(nb::handle obj, const char* op, const char* name) {
  if (obj.is_none()) return std::nullopt;
  return input(obj, op, name);
}

nb::object numpy_dtype(sol::DType dtype) {
  std::string_view sol_name = sol::dtype_name(dtype);
  for (const DTypeName& n : kNames) {
    if (sol_name != n.sol) continue;
    nb::object module;
    try {
      module = nb::module_::import_(n.module);
    } catch (const nb::python_error&) {
      throw DTypeError(std::string("sol: ") + n.numpy + " arrays need the ml_dtypes package (pip install ml_dtypes)");
    }
    return numpy_module().attr("dtype")(module.attr(n.numpy));
  }
  throw DTypeError("sol: dtype " + std::string(sol_name) + " has no numpy equivalent");
}

namespace {
// A raw reference, never released at thread exit: the interpreter may already be gone then.
thread_local PyObject* t_output_allocator = nullptr;
}  // namespace

nb::object set_output_allocator(nb::handle allocator) {
  nb::object previous = t_output_allocator ? nb::steal(t_output_allocator) : nb::none();
  t_output_allocator = allocator.is_none() ? nullptr : nb::borrow(allocator).release().ptr();
  return previous;
}

Array output_or_new(nb::handle out, const char* op, const char* name, std::vector<int64_t> shape, sol::DType dtype,
                    Fill fill) {
  if (!out.is_none()) return output(out, op, name);
  for (int64_t& s : shape) s = std::max<int64_t>(s, 0);
  nb::tuple dims = nb::steal<nb::tuple>(PyTuple_New(Py_ssize_t(shape.size())));
  for (size_t i = 0; i < shape.size(); ++i) PyTuple_SET_ITEM(dims.ptr(), Py_ssize_t(i), PyLong_FromLongLong(shape[i]));
  nb::object fresh =
      t_output_allocator
          ? nb::handle(t_output_allocator)(dims, std::string(sol::dtype_name(dtype)), fill == Fill::zeros)
          : numpy_module().attr(fill == Fill::zeros ? "zeros" : "empty")(dims, numpy_dtype(dtype));
  return output(fresh, op, name);
}

sol::DType dtype_arg(nb::handle obj, const char* op, const char* name) {
  std::string text;
  if (nb::isinstance<nb::str>(obj)) {
    text = nb::cast<std::string>(obj);
  } else {
    std::string shown = to_string(obj);
    if (shown.rfind("torch.", 0) == 0) {
      text = shown.substr(6);
    } else {
      try {
        text = nb::cast<std::string>(numpy_module().attr("dtype")(obj).attr("name"));
      } catch (const nb::python_error&) {
        throw DTypeError(std::string(op) + ": " + name + " = " + shown + " is not a dtype");
      }
    }
  }
  for (const DTypeName& n : kNames)
    if (text == n.numpy)
      if (auto dt = sol_dtype(n.sol)) return *dt;
  try {
    return sol::parse_dtype(text, std::string(op) + ": " + name);
  } catch (const sol::Error& e) {
    throw DTypeError(e.what());
  }
}

}  // namespace solpy

namespace solpy {

void bind_arrays(nb::module_& m) {
  m.def("_set_output_allocator", &set_output_allocator, nb::arg("allocator").none(),
        "Sets this thread's allocator of op outputs (None: numpy); returns the previous one. "
        "sol's torch layer uses it, so that torch inputs get torch outputs.");
}

}  // namespace solpy
