// MachineProfile: looking ceilings up, and its JSON form (the cache file and `sol hw --json`).
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "sol/error.h"
#include "sol/hw.h"

namespace sol {

namespace {

using nlohmann::json;

// Bump when a field or a unit's meaning changes: an older cache is then re-measured rather
// than misread.
// 2: dot_s8 added. 3: fma_f32 and the memory levels measured with AVX2 loops where the CPU lacks
// AVX-512 (a profile from before holds them unavailable there, under the same cache key).
constexpr int kSchemaVersion = 3;

// The raw unit stored values are in (display labels are a giga-prefix of these).
std::string_view raw_unit(Unit u) {
  if (unit_is_memory(u)) return "B/s";
  if (u == Unit::clock) return "Hz";
  if (u == Unit::amx_int8 || u == Unit::dot_s8) return "OP/s";
  return "FLOP/s";
}

template <class T>
T field(const json& object, const char* key, const std::string& where) {
  auto it = object.find(key);
  check(it != object.end(), "machine profile", where, " has no '", key, "'");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    fail("machine profile", where, "'", key, "' has the wrong type: ", it->dump());
  }
}

double rate_field(const json& object, const char* key, const std::string& where) {
  double v = field<double>(object, key, where);
  check(std::isfinite(v) && v >= 0, "machine profile", where, "'", key,
        "' = ", v, " but must be a finite rate >= 0");
  return v;
}

Ceiling ceiling_from_json(const json& j) {
  check(j.is_object(), "machine profile", "a ceiling must be an object, got ", j.dump());
  Ceiling c;
  c.unit = parse_unit(field<std::string>(j, "unit", "ceiling"));
  std::string where = "ceiling " + std::string(unit_name(c.unit)) + ": ";
  std::string units = field<std::string>(j, "units", where);
  check(units == raw_unit(c.unit), "machine profile", where, "units = '", units,
        "' but expected '", raw_unit(c.unit), "'");
  c.available = field<bool>(j, "available", where);
  c.note = field<std::string>(j, "note", where);
  c.one_thread = rate_field(j, "one_thread", where);
  c.all_threads = rate_field(j, "all_threads", where);
  c.threads = field<int>(j, "threads", where);
  check(c.threads >= 0, "machine profile", where, "threads = ", c.threads, " but must be >= 0");
  return c;
}

}  // namespace

const Ceiling& MachineProfile::get(Unit u) const {
  for (const Ceiling& c : ceilings)
    if (c.unit == u) return c;
  fail("machine profile", "no ceiling for ", unit_name(u));
}

double MachineProfile::value(Unit u, int threads) const {
  check(threads >= 1, "machine profile", "threads = ", threads, " but must be >= 1");
  const Ceiling& c = get(u);
  check(c.available, "machine profile", unit_name(u), " is not available on this machine (",
        c.note, ")");
  if (threads == 1 || c.threads <= 1) return c.one_thread;
  // More threads than the measured count only time-slice the same cores.
  if (threads >= c.threads) return c.all_threads;
  double fraction = double(threads - 1) / double(c.threads - 1);
  return c.one_thread + (c.all_threads - c.one_thread) * fraction;
}

std::string MachineProfile::to_json() const {
  json ceilings_json = json::array();
  for (const Ceiling& c : ceilings) {
    ceilings_json.push_back({{"unit", unit_name(c.unit)},
                             {"units", raw_unit(c.unit)},
                             {"available", c.available},
                             {"note", c.note},
                             {"one_thread", c.one_thread},
                             {"all_threads", c.all_threads},
                             {"threads", c.threads}});
  }
  json j = {{"schema", kSchemaVersion},        {"cpu_model", cpu_model},
            {"cores", cores},                  {"measured_at", measured_at},
            {"measure_seconds", measure_seconds}, {"ceilings", ceilings_json}};
  return j.dump(2);
}

MachineProfile MachineProfile::from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("machine profile", "not valid JSON: ", e.what());
  }
  check(j.is_object(), "machine profile", "expected a JSON object, got ", j.type_name());
  int schema = field<int>(j, "schema", "profile ");
  check(schema == kSchemaVersion, "machine profile", "schema = ", schema,
        " but this build reads ", kSchemaVersion);
  MachineProfile p;
  p.cpu_model = field<std::string>(j, "cpu_model", "profile ");
  p.cores = field<int>(j, "cores", "profile ");
  p.measured_at = field<std::string>(j, "measured_at", "profile ");
  p.measure_seconds = rate_field(j, "measure_seconds", "profile ");
  json list = field<json>(j, "ceilings", "profile ");
  check(list.is_array(), "machine profile", "'ceilings' must be an array");
  std::vector<Ceiling> read;
  std::set<Unit> seen;
  for (const json& item : list) {
    Ceiling c = ceiling_from_json(item);
    check(seen.insert(c.unit).second, "machine profile", "ceiling ", unit_name(c.unit),
          " appears twice");
    read.push_back(c);
  }
  // Stored in kAllUnits order whatever the file's order. A missing unit means the file predates
  // it: a device-only unit reads as what measuring it on this CPU gives (unavailable), any other
  // must be re-measured.
  for (Unit u : kAllUnits) {
    if (seen.count(u) == 0 && unit_is_device_only(u)) {
      p.ceilings.push_back(device_only_ceiling(u));
      continue;
    }
    check(seen.count(u) == 1, "machine profile", "no ceiling for ", unit_name(u));
    for (const Ceiling& c : read)
      if (c.unit == u) p.ceilings.push_back(c);
  }
  return p;
}

}  // namespace sol
