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

// Peers: the same op at the same thread count, preferring the same dtype when there are any,
// because an f32 GEMM's efficiency says little about a bf16 one.
std::vector<size_t> peers_of(const std::vector<MeasuredOp>& ops, size_t i) {
  std::vector<size_t> same_dtype, same_op;
  for (size_t j = 0; j < ops.size(); ++j) {
    if (j == i || ops[j].op != ops[i].op || ops[j].threads != ops[i].threads) continue;
    same_op.push_back(j);
    if (ops[j].dtype == ops[i].dtype) same_dtype.push_back(j);
  }
  return same_dtype.empty() ? same_op : same_dtype;
}

}  // namespace

void load_report(const std::string& path, MachineProfile& machine, std::vector<MeasuredOp>& ops) {
  std::ifstream f(path);
  check(bool(f), "sol model loop", "cannot read report '", path, "' (run `sol report` first)");
  std::stringstream text;
  text << f.rdbuf();
  // The readers' parse: nesting bounded (dump() below recurses per level), bytes echoed as ASCII.
  nlohmann::json doc = model_json::parse_document(text.str(), path);
  check(doc.contains("machine") && doc.contains("records"), "sol model loop",
        path, ": expected an object with 'machine' and 'records'");
  machine = MachineProfile::from_json(doc["machine"].dump());
  ops.clear();
  for (size_t i = 0; i < doc["records"].size(); ++i) {
    const auto& r = doc["records"][i];
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
    ops.push_back(m);
  }
}

std::vector<LoopPrediction> predict_measured_ops(const MachineProfile& machine,
                                                 const std::vector<MeasuredOp>& ops) {
  std::vector<double> floors;
  for (const auto& m : ops)
    floors.push_back(roofline_floor(Cost{m.flops, m.bytes, m.compute, m.memory}, machine, m.threads).floor_s);
  std::vector<LoopPrediction> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    LoopPrediction p;
    p.measured = ops[i];
    p.floor_s = floors[i];
    std::vector<double> eff;
    for (size_t j : peers_of(ops, i)) eff.push_back(floors[j] / ops[j].measured_s);
    p.peers = int(eff.size());
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
