// sol::Error -> Python, with the C++ message unchanged:
//   sol.Error(ValueError)                  bad input (shape, size, option, overlap...)
//   sol.DTypeError(sol.Error, TypeError)   the problem is an element type
//   sol.CommError(sol.Error, RuntimeError) a communication wait timed out, a peer died, or
//                                          ranks disagreed (sol::CommError)
// Every Sol exception is a ValueError, so `except ValueError` catches them all.
#include <string_view>

#include "arrays.h"
#include "bindings.h"
#include "sol/comm.h"

namespace solpy {

namespace {

PyObject* g_error = nullptr;
PyObject* g_dtype_error = nullptr;
PyObject* g_comm_error = nullptr;

PyObject* new_exception(nb::module_& m, const char* name, std::initializer_list<PyObject*> bases,
                        const char* doc) {
  nb::tuple base_tuple = nb::steal<nb::tuple>(PyTuple_New(Py_ssize_t(bases.size())));
  Py_ssize_t i = 0;
  for (PyObject* b : bases) PyTuple_SET_ITEM(base_tuple.ptr(), i++, nb::borrow(b).release().ptr());
  std::string qualified = "sol." + std::string(name);
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (!type) nb::raise_python_error();
  m.attr(name) = nb::handle(type);
  return type;  // one reference kept for the life of the process
}

// Sol's messages follow "op: arg.dtype = bf16 but must be f32"; those about an element type
// become DTypeError.
bool is_dtype_problem(std::string_view message) {
  return message.find(".dtype = ") != std::string_view::npos ||
         message.find("--dtype = ") != std::string_view::npos ||
         message.find("cannot convert") != std::string_view::npos ||
         message.find("unknown dtype") != std::string_view::npos;
}

}  // namespace

void bind_errors(nb::module_& m) {
  g_error = new_exception(m, "Error", {PyExc_ValueError}, "Bad input to a Sol operator (sol::Error).");
  g_dtype_error = new_exception(m, "DTypeError", {g_error, PyExc_TypeError},
                                "An array or dtype argument of a type the operator does not take.");
  g_comm_error = new_exception(m, "CommError", {g_error, PyExc_RuntimeError},
                               "A communication wait timed out, a peer died, or ranks disagreed (sol::CommError).");
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const DTypeError& e) {
      PyErr_SetString(g_dtype_error, e.what());
    } catch (const sol::CommError& e) {
      PyErr_SetString(g_comm_error, e.what());
    } catch (const sol::Error& e) {
      PyErr_SetString(is_dtype_problem(e.what()) ? g_dtype_error : g_error, e.what());
    }
  });
}

}  // namespace solpy
