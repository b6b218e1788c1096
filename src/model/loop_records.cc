// Reading the records `sol model loop` predicts: report.json, or `sol bench --json`'s array.
#include <cmath>
#include <nlohmann/json.hpp>

#include "model/strict_json.h"
#include "sol/error.h"
#include "sol/model_loop.h"

namespace sol {

namespace {

template <class T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
  check(j.is_object() && j.contains(key), "sol model loop", where, ": missing key '", key, "'");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("sol model loop", where, ": key '", key, "' has the wrong type (", j.at(key).type_name(), ")");
  }
}

double finite_at_least(const nlohmann::json& r, const char* key, double min_value, const std::string& where) {
  const double v = field<double>(r, key, where);
  check(std::isfinite(v) && v >= min_value, "sol model loop", where, ": ", key, " = ", v, " but must be >= ",
        min_value);
  return v;
}

}  // namespace

void read_loop_records(const std::string& path, MachineProfile& machine, std::vector<LoopRecord>& ops) {
  bool bare_array = false;
  nlohmann::json doc = model_json::read_records_file(path, "sol model loop", "run `sol report` first", &bare_array);
  const nlohmann::json* records = nullptr;
  if (bare_array) {
    records = &doc["records"];
  } else if (doc.contains("machine") && doc.contains("records")) {
    machine = MachineProfile::from_json(doc["machine"].dump());
    records = &doc["records"];
  }
  check(records && records->is_array(), "sol model loop", path,
        ": expected an object with 'machine' and 'records', or an array of records");
  ops.clear();
  for (size_t i = 0; i < records->size(); ++i) {
    const auto& r = (*records)[i];
    std::string where = path + " records[" + std::to_string(i) + "]";
    LoopRecord m;
    m.op = field<std::string>(r, "op", where);
    m.shape = field<std::string>(r, "shape", where);
    m.dtype = field<std::string>(r, "dtype", where);
    const int64_t threads = field<int64_t>(r, "threads", where);  // get<int> would wrap a large one
    check(threads >= 1 && threads <= 4096, "sol model loop", where, ": threads = ", threads, " is not in [1, 4096]");
    m.threads = int(threads);
    m.flops = finite_at_least(r, "flops", 0, where);
    m.bytes = finite_at_least(r, "bytes", 0, where);
    if (r.contains("read_bytes")) m.read_bytes = finite_at_least(r, "read_bytes", 0, where);
    check(m.read_bytes <= m.bytes, "sol model loop", where, ": read_bytes = ", m.read_bytes,
          " is more than bytes = ", m.bytes);
    m.compute = parse_unit(field<std::string>(r, "compute_unit", where));
    m.memory = parse_unit(field<std::string>(r, "memory_unit", where));
    m.measured_s = field<double>(r, "time_s", where);
    check(std::isfinite(m.measured_s) && m.measured_s > 0, "sol model loop", where, ": time_s = ", m.measured_s,
          " but must be > 0");
    if (r.contains("min_s")) m.min_s = finite_at_least(r, "min_s", 0, where);
    if (r.contains("ceiling_moved")) m.ceiling_moved = field<double>(r, "ceiling_moved", where);
    if (r.contains("bound")) m.bound = field<std::string>(r, "bound", where);
    // The in-cache run is held to the same ceilings as the record's floor_s, so floor_s over its
    // SOL% is its time scaled to this shape; neither involves this record's own time_s.
    const auto number = [&](const char* key) { return r.contains(key) && r.at(key).is_number(); };
    if (number("in_cache_sol_pct") && number("floor_s")) {
      const double pct = finite_at_least(r, "in_cache_sol_pct", 0, where);
      const double floor_s = finite_at_least(r, "floor_s", 0, where);
      if (pct > 0 && floor_s > 0) m.in_cache_s = floor_s * 100 / pct;
    }
    ops.push_back(m);
  }
}

}  // namespace sol
