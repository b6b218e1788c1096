// sol.tile: the tile language from its text form: parse / print / verify a program, run it with
// the reference interpreter, lower it, and JIT-compile it into a kernel called on arrays.
// (The C++ Builder is not bound: Python writes the text form.)
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "arrays.h"
#include "bindings.h"
#include "sol/tile.h"

namespace solpy {

using namespace nb::literals;

namespace {

namespace tl = sol::tile;

// Parameters a statement (or its body) may write: destinations that name a parameter.
void collect_written(const std::vector<tl::Stmt>& body, const tl::Program& p, std::set<std::string>& out) {
  for (const tl::Stmt& s : body) {
    int dst = -1;
    switch (s.kind) {
      case tl::Stmt::copy: case tl::Stmt::cast: case tl::Stmt::reduce: dst = 1; break;
      case tl::Stmt::gemm: case tl::Stmt::ukernel: dst = 2; break;
      case tl::Stmt::fill: case tl::Stmt::assign: dst = 0; break;
      default: break;
    }
    if (dst >= 0 && size_t(dst) < s.refs.size() && p.param(s.refs[size_t(dst)].name)) out.insert(s.refs[size_t(dst)].name);
    collect_written(s.body, p, out);
  }
}

// One array per parameter, in order: the ones the program writes must be writable.
std::vector<Array> program_args(const tl::Program& p, nb::args args, const char* op) {
  sol::check(args.size() == p.params.size(), op, "kernel ", p.name, " takes ", p.params.size(),
             " arrays (one per parameter) but got ", args.size());
  std::set<std::string> written;
  collect_written(p.body, p, written);
  std::vector<Array> arrays;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const std::string& name = p.params[i].name;
    arrays.push_back(written.count(name) ? output(args[i], op, name.c_str()) : input(args[i], op, name.c_str()));
  }
  return arrays;
}

std::vector<sol::Tensor> tensors(const std::vector<Array>& arrays) {
  std::vector<sol::Tensor> t;
  for (const Array& a : arrays) t.push_back(*a);
  return t;
}

// A Program argument: a Program, or program text (parsed).
tl::Program program_arg(nb::handle obj) {
  if (nb::isinstance<nb::str>(obj)) return tl::parse(nb::cast<std::string>(obj));
  return nb::cast<tl::Program>(obj);
}

struct PyKernel {
  std::shared_ptr<const tl::Kernel> kernel;
  tl::Program source;  // as given (the kernel's own program is the lowered one)
  tl::CompileInfo info;
};

tl::CompileOptions compile_options(bool memory_cache) {
  tl::CompileOptions o;
  o.memory_cache = memory_cache;
  return o;
}

}  // namespace

void bind_tile(nb::module_& m) {
  nb::module_ t = m.def_submodule("tile", "Sol's tile language from its text form (sol::tile).");

  nb::class_<tl::Program>(t, "Program", "A tile program (sol::tile::Program); str() gives its text form.")
      .def(nb::init<>())
      .def("__init__", [](tl::Program* self, const std::string& text, const std::string& file) {
        new (self) tl::Program(tl::parse(text, file));
      }, "text"_a, "file"_a = "<program>", "Parses the text form (sol.Error 'FILE:LINE: ...' on a syntax error).")
      .def_ro("name", &tl::Program::name)
      .def_prop_ro("params", [](const tl::Program& p) {
        nb::list out;
        for (const tl::Param& q : p.params) {
          nb::list shape;
          for (const tl::Expr& e : q.shape) {
            if (e->kind == tl::ExprNode::integer) shape.append(e->ivalue);
            else shape.append(tl::print(e));
          }
          out.append(nb::make_tuple(q.name, std::string(sol::dtype_name(q.dtype)), shape));
        }
        return out;
      }, "[(name, dtype, shape)]: shape entries are ints or dim names / expressions.")
      .def_prop_ro("grid", [](const tl::Program& p) {
        nb::list out;
        for (const tl::GridAxis& a : p.grid) out.append(nb::make_tuple(a.name, tl::print(a.extent)));
        return out;
      }, "[(axis, extent expression)].")
      .def_ro("attrs", &tl::Program::attrs)
      .def("dims", &tl::Program::dims, "Dim names in order of first appearance.")
      .def("__str__", [](const tl::Program& p) { return tl::print(p); })
      .def("__repr__", [](const tl::Program& p) {
        return "<sol.tile.Program " + p.name + ": " + std::to_string(p.params.size()) + " params, " +
               std::to_string(p.body.size()) + " statements>";
      });

  t.def("parse", [](const std::string& text, const std::string& file) { return tl::parse(text, file); },
        "text"_a, "file"_a = "<program>", "Text form -> Program; sol.Error 'FILE:LINE: ...' on a syntax error.");
  t.def("print", [](const tl::Program& p) { return tl::print(p); }, "program"_a,
        "Program -> text form; print(parse(text)) == text for printed programs.");
  t.def("verify", [](nb::handle p) { tl::verify(program_arg(p)); }, "program"_a,
        "Checks shapes, dtypes, names, bounds and layouts; sol.Error 'kernel NAME, line L: ...'. Program or text.");
  t.def("pass_names", &tl::pass_names, "The lowering passes in pipeline order.");
  t.def("lower", [](nb::handle p, std::vector<std::string> dump_after) {
    tl::Program prog = program_arg(p);
    tl::CompileOptions o;
    o.dump_after = std::move(dump_after);
    o.cpu = tl::cpu_target_here();  // what compile() would lower on this machine
    tl::Program lowered;
    released([&] { lowered = tl::lower(prog, o); });
    return lowered;
  }, "program"_a, "dump_after"_a = std::vector<std::string>{},
  "Verifies and runs the CPU pass pipeline (dumps of the named passes, or 'all', go to stderr).");
  t.def("emit_cpp", [](const tl::Program& lowered) { return tl::emit_cpp(lowered); }, "lowered"_a,
        "C++ source of a lowered program (what compile() builds).");
  t.def("interpret", [](nb::handle p, nb::args args) {
    tl::Program prog = program_arg(p);
    std::vector<Array> arrays = program_args(prog, args, "tile interpret");
    std::vector<sol::Tensor> ts = tensors(arrays);
    released([&] { tl::interpret(prog, ts); });
  }, "program"_a, "args"_a,
  "Runs the program with the scalar reference interpreter on one array per parameter (in place).");
  t.def("compile", [](nb::handle p, bool memory_cache) {
    auto k = std::make_unique<PyKernel>();
    k->source = program_arg(p);
    tl::CompileOptions o = compile_options(memory_cache);
    released([&] { k->kernel = tl::compile(k->source, o, &k->info); });
    return k.release();
  }, "program"_a, nb::kw_only(), "memory_cache"_a = true, nb::rv_policy::take_ownership,
  "Program or text -> Kernel: lowered, emitted as C++, built by the system compiler into the JIT cache "
  "(SOL_JIT_CACHE_DIR, default ~/.cache/sol/jit) and loaded.");

  nb::class_<PyKernel>(t, "Kernel", "A compiled tile program: call it with one array per parameter.")
      .def("__call__", [](const PyKernel& k, nb::args args) {
        std::vector<Array> arrays = program_args(k.source, args, "tile kernel");
        std::vector<sol::Tensor> ts = tensors(arrays);
        released([&] { (*k.kernel)(ts); });
      }, "args"_a, "One array per parameter, in order; dims are bound from the shapes (and must agree).")
      .def_prop_ro("program", [](const PyKernel& k) { return k.kernel->program(); }, "The program as lowered.")
      .def_prop_ro("source", [](const PyKernel& k) { return k.source; }, "The program as given.")
      .def_prop_ro("library_path", [](const PyKernel& k) { return k.kernel->library_path(); })
      .def_prop_ro("info", [](const PyKernel& k) {
        nb::dict d;
        d["memory_hit"] = k.info.memory_hit;
        d["disk_hit"] = k.info.disk_hit;
        d["seconds"] = k.info.seconds;
        d["key"] = k.info.key;
        return d;
      }, "How compile() went: {'memory_hit', 'disk_hit', 'seconds', 'key'}.");
}

}  // namespace solpy
