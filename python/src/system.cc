// The machine and the suite from Python: threads, sol.hw(), sol.bench(), sol.check(),
// sol.report(), the op registry. Records are the CLI's JSON (sol::bench_record_json,
// MachineProfile::to_json) turned into plain dicts, so both always agree.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "arrays.h"
#include "bindings.h"
#include "sol/bench.h"
#include "sol/hw.h"
#include "sol/registry.h"
#include "sol/threads.h"

namespace solpy {

namespace {

using namespace nb::literals;

nb::object from_json(const std::string& text) { return nb::module_::import_("json").attr("loads")(text); }

sol::MachineProfile machine(bool remeasure) {
  sol::MachineProfile p;
  released([&] { p = sol::load_or_measure_machine(remeasure); });
  return p;
}

// Python keyword values as the registry's strings: 4096 -> "4096", ml_dtypes.bfloat16 -> "bf16".
std::map<std::string, std::string> op_params(const sol::OpInfo& op, const nb::kwargs& kwargs) {
  std::map<std::string, std::string> given;
  for (auto [key, value] : kwargs) {
    std::string name = nb::cast<std::string>(key);
    const sol::ParamSpec* spec = nullptr;
    for (const auto& p : op.params)
      if (p.name == name) spec = &p;
    if (spec && spec->kind == sol::ParamSpec::dtype && !nb::isinstance<nb::str>(value))
      given[name] = std::string(sol::dtype_name(dtype_arg(value, op.name.c_str(), name.c_str())));
    else
      given[name] = to_string(value);
  }
  return given;
}

nb::list bench(const std::string& op_name, int threads, bool cold, bool check, bool pair, bool in_cache,
               double min_time, bool remeasure, const nb::kwargs& kwargs) {
  const sol::OpInfo& op = sol::find_op(op_name);
  std::vector<std::map<std::string, std::string>> cases;
  if (kwargs.size() == 0) cases = op.bench_table;
  else cases.push_back(op_params(op, kwargs));
  if (cases.empty()) cases.push_back({});
  sol::MachineProfile m = machine(remeasure);
  sol::BenchOptions opt;
  opt.threads = threads;
  opt.cold = cold;
  opt.run_check = check;
  opt.pair_ceiling = pair;
  opt.in_cache = in_cache;
  opt.timing.min_seconds = min_time;
  nb::list out;
  for (const auto& c : cases) {
    sol::OpParams params = sol::resolve_params(op, c);
    sol::BenchRecord r;
    released([&] { r = sol::bench_case(op, params, m, opt); });
    out.append(from_json(sol::bench_record_json(r)));
  }
  return out;
}

// As `sol report`: every case of every op's bench table (or of the ops named) at 1 thread and
// at all threads, checked once on the multi-threaded run. Returns report.json's content.
nb::dict report(std::optional<std::vector<std::string>> only, double min_time, bool remeasure) {
  std::vector<const sol::OpInfo*> ops;
  if (only) for (const auto& name : *only) ops.push_back(&sol::find_op(name));
  else for (const auto& op : sol::registered_ops()) ops.push_back(&op);
  sol::MachineProfile m = machine(remeasure);
  const int all = sol::num_threads();
  std::vector<int> thread_counts = {1};
  if (all > 1) thread_counts.push_back(all);
  nb::list records;
  for (const sol::OpInfo* op : ops) {
    for (const auto& c : op->bench_table) {
      sol::OpParams params = sol::resolve_params(*op, c);
      sol::PreparedCase prepared;
      released([&] { prepared = sol::prepare_case(*op, params, false); });
      for (int threads : thread_counts) {
        sol::BenchOptions opt;
        opt.threads = threads;
        opt.run_check = threads == all;
        opt.timing.min_seconds = min_time;
        sol::BenchRecord r;
        released([&] { r = sol::bench_prepared(*op, prepared, m, opt); });
        records.append(from_json(sol::bench_record_json(r)));
      }
    }
  }
  nb::dict doc;
  doc["machine"] = from_json(m.to_json());
  doc["records"] = records;
  return doc;
}

// As `sol check [OP]`: one dict per check case.
nb::list check(std::optional<std::string> op_name) {
  std::vector<const sol::OpInfo*> ops;
  if (op_name) ops.push_back(&sol::find_op(*op_name));
  else for (const auto& op : sol::registered_ops()) ops.push_back(&op);
  nb::list out;
  for (const sol::OpInfo* op : ops) {
    for (const auto& c : op->check_table) {
      sol::OpParams params = sol::resolve_params(*op, c);
      std::unique_ptr<sol::OpCase> oc;
      sol::CheckResult r;
      released([&] {
        oc = op->make(params, 0);
        r = oc->check();
      });
      nb::dict d;
      d["op"] = op->name;
      d["shape"] = oc->shape();
      d["dtype"] = oc->dtype();
      d["pass"] = r.pass;
      d["error"] = r.error;
      d["tolerance"] = r.tolerance;
      d["detail"] = r.detail;
      out.append(d);
    }
  }
  return out;
}

nb::list ops() {
  static const char* kinds[] = {"integer", "size", "dtype", "text"};
  nb::list out;
  for (const auto& op : sol::registered_ops()) {
    nb::list params;
    for (const auto& p : op.params) {
      nb::dict d;
      d["name"] = p.name;
      d["help"] = p.help;
      d["default"] = p.default_value;
      d["kind"] = kinds[p.kind];
      params.append(d);
    }
    nb::dict d;
    d["name"] = op.name;
    d["summary"] = op.summary;
    d["params"] = params;
    d["bench_table"] = op.bench_table;
    d["check_table"] = op.check_table;
    out.append(d);
  }
  return out;
}

nb::dict cpu_features() {
  const sol::CpuFeatures& f = sol::cpu_features();
  nb::dict d;
  d["vendor"] = f.vendor;
  d["model_name"] = f.model_name;
  d["logical_cpus"] = f.logical_cpus;
  d["avx2"] = f.avx2 && f.os_avx;
  d["avx512"] = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.os_avx512;
  d["avx512_bf16"] = f.avx512_bf16;
  d["avx512_fp16"] = f.avx512_fp16;
  d["amx_tile"] = f.amx_tile;
  d["amx_bf16"] = f.amx_bf16;
  d["amx_int8"] = f.amx_int8;
  d["amx_status"] = f.amx_status;
  d["l1d_bytes"] = f.l1d_bytes;
  d["l2_bytes"] = f.l2_bytes;
  d["l3_bytes"] = f.l3_bytes;
  d["best_isa"] = std::string(sol::isa_name(f.best_isa));
  d["active_isa"] = std::string(sol::isa_name(sol::active_isa()));
  return d;
}

}  // namespace

void bind_system(nb::module_& m) {
  m.def("num_threads", &sol::num_threads, "Threads Sol's ops use (SOL_NUM_THREADS, else all cores).");
  m.def("set_num_threads", &sol::set_num_threads, "n"_a, "Threads for this process; 0 restores the default.");
  m.def("hardware_threads", &sol::hardware_threads);
  m.def("cpu_features", &cpu_features, "What the CPU and OS offer, and the active path (SOL_ISA).");
  m.def("active_isa", [] { return std::string(sol::isa_name(sol::active_isa())); });
  m.def("hw", [](bool remeasure) { return from_json(machine(remeasure).to_json()); },
        nb::kw_only(), "remeasure"_a = false,
        "The measured ceilings of this machine, as `sol hw --json` prints them (measured once, then cached).");
  m.def("bench", &bench, "op"_a, nb::kw_only(), "threads"_a = 0, "cold"_a = false, "check"_a = false,
        "pair"_a = true, "in_cache"_a = true, "min_time"_a = 0.2, "remeasure"_a = false, "params"_a,
        "Benchmarks a registered op, as `sol bench OP --json`: one dict per case. Keyword arguments "
        "other than the options name the shape (sol.bench('gemm', m=256, n=256, k=256)); none: the "
        "op's shape table. in_cache: also time a memory-bound op shrunk to fit in L2 (in_cache_* "
        "fields; see `sol bench --help`).");
  m.def("report", &report, nb::kw_only(), "ops"_a = nb::none(), "min_time"_a = 0.2, "remeasure"_a = false,
        "The whole suite as `sol report` runs it (or only `ops`): {'machine': ..., 'records': [...]}, "
        "report.json's content.");
  m.def("check", &check, "op"_a = nb::none(),
        "The correctness cases of every op (or one), as `sol check`: one dict per case.");
  m.def("ops", &ops, "The registered ops: name, summary, parameters, shape tables.");
  m.def("op_cost", [](const std::string& op_name, const nb::kwargs& kwargs) {
    const sol::OpInfo& op = sol::find_op(op_name);
    if (!op.cost) sol::fail("op_cost", "op '", op_name, "' has no cost without building a case");
    const sol::Cost c = op.cost(sol::resolve_params(op, op_params(op, kwargs)));
    nb::dict d;
    d["flops"] = c.flops;
    d["bytes"] = c.bytes;
    d["compute"] = std::string(sol::unit_name(c.compute));
    d["memory"] = std::string(sol::unit_name(c.memory));
    return d;
  }, "op"_a, "params"_a,
  "The registry's cost of one case of op for these parameters (sol.op_cost('mla-decode-absorbed', batch=1, "
  "seqlen=72, ...)), without running it: {'flops', 'bytes', 'compute', 'memory'} (the units' names as in "
  "sol.hw()). sol.Error for an op whose cost needs a built case.");
}

}  // namespace solpy
