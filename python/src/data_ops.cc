// Data movement: copy, cast, embedding.
#include <nanobind/stl/string.h>

#include "arrays.h"
#include "bindings.h"
#include "sol/copy.h"
#include "sol/embedding.h"

namespace solpy {

using namespace nb::literals;

void bind_data_ops(nb::module_& m) {
  m.def("copy", [](nb::handle src, nb::handle out) {
    Array s = input(src, "copy", "src");
    Array d = output_or_new(out, "copy", "out", {s->shape().begin(), s->shape().end()}, s->dtype());
    released([&] { sol::copy(*s, *d); });
    return d.object;
  }, "src"_a, nb::kw_only(), "out"_a = nb::none(),
  "out = src (same shape and dtype; any strides). Returns out.");

  m.def("cast", [](nb::handle src, nb::handle dtype, nb::handle out) {
    Array s = input(src, "cast", "src");
    if (dtype.is_none() && out.is_none()) sol::fail("cast", "give dtype or out (the type to convert to)");
    Array d = out.is_none()
                  ? output_or_new(out, "cast", "out", {s->shape().begin(), s->shape().end()},
                                  dtype_arg(dtype, "cast", "dtype"))
                  : output(out, "cast", "out");
    if (!dtype.is_none() && dtype_arg(dtype, "cast", "dtype") != d->dtype())
      sol::fail("cast", "dtype = ", sol::dtype_name(dtype_arg(dtype, "cast", "dtype")), " but out.dtype = ",
                sol::dtype_name(d->dtype()));
    released([&] { sol::cast(*s, *d); });
    return d.object;
  }, "src"_a, "dtype"_a = nb::none(), nb::kw_only(), "out"_a = nb::none(),
  "Converts between f32, bf16, f16, f8e4m3 and f8e5m2 (round to nearest even, Sol's saturation rules). "
  "Returns out.");

  m.def("embedding", [](nb::handle table, nb::handle ids, nb::handle out) {
    Array t = input(table, "embedding", "table"), i = input(ids, "embedding", "ids");
    Array o = output_or_new(out, "embedding", "out", {i.dim(0), t.dim(1)}, t->dtype());
    released([&] { sol::embedding(*t, *i, *o); });
    return o.object;
  }, "table"_a, "ids"_a, nb::kw_only(), "out"_a = nb::none(),
  "out[t] = table[ids[t]]; ids int32, every id checked before anything is written. Returns out.");
}

}  // namespace solpy
