// Closing the loop: predict Sol's own measured ops on this machine and report the error.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/strict_json.h"
#include "sol/error.h"
#include "sol/model.h"
#include "sol/roofline.h"

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

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// A sample whose median run took this much longer than its fastest was cut into by the
// scheduler in most runs; its ceiling moved past this between its measurements, its floor is
// uncertain (docs/ARCHITECTURE.md, decision 15).
constexpr double kScheduledOutRatio = 1.5, kCeilingMovedLimit = 1.2;
// Floors within this factor are one size regime: a decode GEMM of 16 rows streams its weights,
// one of 4096 rows computes, and neither says much about the other.
constexpr double kRegimeFactor = 4;

std::string why_dropped(const MeasuredOp& m) {
  if (m.min_s > 0 && m.measured_s > kScheduledOutRatio * m.min_s)
    return "cut by the scheduler (median " + std::to_string(m.measured_s / m.min_s) + "x the fastest run)";
  if (m.ceiling_moved > kCeilingMovedLimit) return "its paired ceiling moved during the run";
  return "";
}

// Peers: the same op at the same thread count, nearest first: the same dtype and bound with a
// floor within kRegimeFactor (the size regime), then the same dtype and bound (an f32 GEMM's
// efficiency says little about a bf16 one), then the same bound (a compute-bound GEMM's says
// nothing about a weight-streaming one), then any.
std::vector<size_t> peers_of(const std::vector<MeasuredOp>& ops, const std::vector<double>& floors,
                             const std::vector<bool>& usable, size_t i, std::string& regime) {
  std::vector<size_t> size, dtype, bound, op;
  for (size_t j = 0; j < ops.size(); ++j) {
    if (j == i || !usable[j] || ops[j].op != ops[i].op || ops[j].threads != ops[i].threads) continue;
    op.push_back(j);
    if (ops[j].bound != ops[i].bound) continue;
    bound.push_back(j);
    if (ops[j].dtype != ops[i].dtype) continue;
    dtype.push_back(j);
    double ratio = floors[j] / floors[i];
    if (ratio <= kRegimeFactor && ratio >= 1 / kRegimeFactor) size.push_back(j);
  }
  for (auto [name, set] : {std::pair{"size", &size}, {"dtype", &dtype}, {"bound", &bound}, {"op", &op}})
    if (!set->empty()) {
      regime = name;
      return *set;
    }
  regime.clear();
  return {};
}

}  // namespace

void load_report(const std::string& path, MachineProfile& machine, std::vector<MeasuredOp>& ops) {
  std::ifstream f(path);
  check(bool(f), "sol model loop", "cannot read report '", path, "' (run `sol report` first)");
  std::stringstream text;
  text << f.rdbuf();
  // The readers' parse: nesting bounded (dump() below recurses per level), bytes echoed as ASCII.
  nlohmann::json doc = model_json::parse_document(text.str(), path);
  const nlohmann::json* records = doc.is_array() ? &doc : nullptr;
  if (doc.is_object() && doc.contains("machine") && doc.contains("records")) {
    machine = MachineProfile::from_json(doc["machine"].dump());
    records = &doc["records"];
  }
  check(records && records->is_array(), "sol model loop", path,
        ": expected an object with 'machine' and 'records', or an array of records");
  ops.clear();
  for (size_t i = 0; i < records->size(); ++i) {
    const auto& r = (*records)[i];
    std::string where = path + " records[" + std::to_string(i) + "]";
    MeasuredOp m;
    m.op = field<std::string>(r, "op", where);
    m.shape = field<std::string>(r, "shape", where);
    m.dtype = field<std::string>(r, "dtype", where);
    const int64_t threads = field<int64_t>(r, "threads", where);  // get<int> would wrap a large one
    check(threads >= 1 && threads <= 4096, "sol model loop", where, ": threads = ", threads, " is not in [1, 4096]");
    m.threads = int(threads);
    m.flops = field<double>(r, "flops", where);
    m.bytes = field<double>(r, "bytes", where);
    m.compute = parse_unit(field<std::string>(r, "compute_unit", where));
    m.memory = parse_unit(field<std::string>(r, "memory_unit", where));
    m.measured_s = field<double>(r, "time_s", where);
    check(m.measured_s > 0, "sol model loop", where, ": time_s = ", m.measured_s, " but must be > 0");
    if (r.contains("min_s")) m.min_s = field<double>(r, "min_s", where);
    if (r.contains("ceiling_moved")) m.ceiling_moved = field<double>(r, "ceiling_moved", where);
    if (r.contains("bound")) m.bound = field<std::string>(r, "bound", where);
    ops.push_back(m);
  }
}

std::vector<LoopPrediction> predict_measured_ops(const MachineProfile& machine,
                                                 const std::vector<MeasuredOp>& ops) {
  std::vector<double> floors;
  for (const auto& m : ops)
    floors.push_back(roofline_floor(Cost{m.flops, m.bytes, m.compute, m.memory}, machine, m.threads).floor_s);
  std::vector<bool> usable;
  for (const auto& m : ops) usable.push_back(why_dropped(m).empty());
  std::vector<LoopPrediction> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    LoopPrediction p;
    p.measured = ops[i];
    p.floor_s = floors[i];
    p.dropped = why_dropped(ops[i]);
    if (!p.dropped.empty()) {
      out.push_back(p);
      continue;
    }
    std::vector<double> eff;
    for (size_t j : peers_of(ops, floors, usable, i, p.regime))
      eff.push_back(floors[j] / ops[j].measured_s);
    p.peers = int(eff.size());
    p.single_peer = p.peers == 1;
    if (!eff.empty()) {
      p.efficiency = median(eff);
      p.predicted_s = p.floor_s / p.efficiency;
      p.error_pct = 100.0 * (p.predicted_s - ops[i].measured_s) / ops[i].measured_s;
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace sol
