// The efficiency layer from Sol's own kernel records: each record's floor (against the ceilings
// paired with it in the same run) over its measured time, filed under the work class the
// co-design model gives the same kind of op.
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/sample_rules.h"
#include "model/strict_json.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol {

namespace {
using model_detail::why_not_evidence;
constexpr double kMaxEfficiency = 1.5;  // as parse_efficiency accepts

std::string shape_class(double rows) {
  if (rows <= 128) return "decode";
  if (rows < 2048) return "mid";
  return "large";
}

// "m=16,n=2048,..." -> 16; -1 when absent.
double shape_value(const std::string& shape, const std::string& key) {
  std::string field = key + "=";
  for (size_t at = shape.find(field); at != std::string::npos; at = shape.find(field, at + 1)) {
    if (at > 0 && shape[at - 1] != ',') continue;
    return std::atof(shape.c_str() + at + field.size());
  }
  return -1;
}

// Rows per group of a grouped GEMM: "rows=a:b:c" over "experts=E".
double rows_per_group(const std::string& shape) {
  size_t at = shape.find("rows=");
  double experts = shape_value(shape, "experts");
  if (at == std::string::npos || experts <= 0) return -1;
  double total = 0;
  std::stringstream list(shape.substr(at + 5, shape.find(',', at) - at - 5));
  for (std::string item; std::getline(list, item, ':');) total += std::atof(item.c_str());
  return total / experts;
}

template <class T>
T field(const nlohmann::json& j, const char* key, const std::string& where) {
  check(j.is_object() && j.contains(key), "sol model calibrate", where, ": missing key '", key,
        "'");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("sol model calibrate", where, ": key '", key, "' has the wrong type (",
         j.at(key).type_name(), ")");
  }
}
}  // namespace

// The compute dtype of a record's dtype ("bf16xf8e4m3->bf16" -> bf16, "fp8" -> f8e4m3).
std::string sol_op_compute_dtype(const std::string& dtype) {
  std::string first = dtype.substr(0, dtype.find_first_of("x-, "));
  try {
    return std::string(dtype_name(parse_dtype(first, "dtype")));
  } catch (const Error&) {
    return first;
  }
}

std::string sol_op_work_class(const std::string& op, const std::string& dtype,
                              const std::string& shape, const std::string& bound) {
  if (op == "gemm") {
    double m = shape_value(shape, "m");
    return "gemm." + sol_op_compute_dtype(dtype) + "." + shape_class(m < 0 ? 0 : m);
  }
  if (op == "gemm-grouped") {
    double rows = rows_per_group(shape);
    return "grouped_gemm." + sol_op_compute_dtype(dtype) + "." + shape_class(rows < 0 ? 0 : rows);
  }
  if (op == "attention") return "attention.fwd";
  if (op == "attention-bwd") return "attention.bwd";
  if (op == "mla-decode") return std::string("mla.decode.") + (bound == "compute" ? "compute" : "memory");
  return "memory";
}

std::vector<KernelSample> read_kernel_samples(const std::string& path, int threads) {
  const nlohmann::json doc = model_json::read_records_file(
      path, "sol model calibrate", "write it with `sol report` or `sol bench OP --json > FILE`");
  const nlohmann::json* records = doc.contains("records") ? &doc.at("records") : nullptr;
  check(records && records->is_array(), "sol model calibrate", path,
        ": expected report.json (an object with 'records') or an array of records");
  std::vector<KernelSample> out;
  for (size_t i = 0; i < records->size(); ++i) {
    const nlohmann::json& r = (*records)[i];
    std::string where = path + " records[" + std::to_string(i) + "]";
    KernelSample s;
    s.op = field<std::string>(r, "op", where);
    s.shape = field<std::string>(r, "shape", where);
    s.dtype = field<std::string>(r, "dtype", where);
    const int64_t record_threads = field<int64_t>(r, "threads", where);  // get<int> would wrap a large one
    check(record_threads >= 1 && record_threads <= 4096, "sol model calibrate", where, ": threads = ",
          record_threads, " is not in [1, 4096]");
    s.threads = int(record_threads);
    s.floor_s = field<double>(r, "floor_s", where);
    s.time_s = field<double>(r, "time_s", where);
    check(s.time_s > 0 && std::isfinite(s.time_s), "sol model calibrate", where, ": time_s = ",
          s.time_s, " but must be > 0");
    check(s.floor_s >= 0 && std::isfinite(s.floor_s), "sol model calibrate", where,
          ": floor_s = ", s.floor_s, " but must be >= 0");
    if (threads > 0 && s.threads != threads) continue;
    s.work = sol_op_work_class(s.op, s.dtype, s.shape,
                               r.contains("bound") && r["bound"].is_string() ? r["bound"].get<std::string>() : "");
    const double moved = r.contains("ceiling_moved") && r["ceiling_moved"].is_number()
                       ? r["ceiling_moved"].get<double>() : 1.0;
    const double min_s = r.contains("min_s") && r["min_s"].is_number() ? r["min_s"].get<double>() : 0.0;
    s.dropped = why_not_evidence(s.time_s, min_s, moved);
    if (s.dropped.empty() && s.floor_s <= 0)
      s.dropped = "no floor";
    else if (s.dropped.empty() && s.floor_s / s.time_s > kMaxEfficiency)
      s.dropped = "faster than 1.5x its floor: the ceiling under it is wrong";
    out.push_back(s);
  }
  return out;
}

Efficiency efficiency_from_samples(const std::vector<KernelSample>& samples,
                                   const std::string& name, const std::string& source) {
  Efficiency e;
  e.name = name;
  e.description = "Sol's own kernel records from " + source +
                  ": each row a record's floor (ceilings paired in the same run) over its time";
  for (const KernelSample& s : samples) {
    if (!s.dropped.empty()) continue;
    std::ostringstream measured;
    measured << s.time_s << " s";
    e.rows.push_back({s.work, s.floor_s / s.time_s,
                      "sol " + s.op + " " + s.dtype + ", " + std::to_string(s.threads) + " thread" +
                          (s.threads == 1 ? "" : "s"),
                      s.shape, measured.str(), source});
  }
  check(!e.rows.empty(), "sol model calibrate", source, ": no usable record (", samples.size(),
        " read, all dropped or filtered out)");
  return e;
}

double calibrated_time(const Efficiency& e, const KernelSample& s) {
  return s.floor_s / e.fraction(s.work);
}

}  // namespace sol
