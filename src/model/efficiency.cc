// The efficiency layer's file: rows of kernel measurements, each naming its work class, its
// efficiency (floor / measured) and its source; a class's fraction is its rows' median.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/strict_json.h"
#include "sol/error.h"
#include "sol/model.h"

namespace sol {

namespace {
using model_json::Fields;

// The largest efficiency a row may claim: a kernel measured against a floor of the same
// ceilings cannot beat it by much (Sol's paired ceilings move by up to ~20% between runs).
constexpr double kMaxEfficiency = 1.5;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// Rows whose class is `work`, and with `subclasses` also those under it (`work.`...).
std::vector<double> efficiencies_of(const Efficiency& e, const std::string& work, bool subclasses) {
  std::vector<double> out;
  for (const EfficiencyRow& r : e.rows)
    if (r.work == work || (subclasses && r.work.rfind(work + ".", 0) == 0))
      out.push_back(r.efficiency);
  return out;
}

// Where a class looks for rows, nearest first: the class itself and, for a grouped GEMM, the
// plain GEMM of its dtype and shape class (exact matches); then each shorter prefix with
// every class under it.
struct Candidate {
  std::string work;
  bool subclasses;
};
std::vector<Candidate> fallback_chain(const std::string& work) {
  std::vector<Candidate> chain = {{work, false}};
  const std::string grouped = "grouped_gemm.";
  if (work.rfind(grouped, 0) == 0) chain.push_back({"gemm." + work.substr(grouped.size()), false});
  for (std::string prefix = work; prefix.find('.') != std::string::npos;) {
    prefix = prefix.substr(0, prefix.rfind('.'));
    chain.push_back({prefix, true});
  }
  return chain;
}
}  // namespace

double Efficiency::fraction(const std::string& work, std::string* used) const {
  for (const Candidate& c : fallback_chain(work)) {
    std::vector<double> found = efficiencies_of(*this, c.work, c.subclasses);
    if (found.empty()) continue;
    if (used) *used = c.work;
    // A kernel cannot beat its floor: a median above 1 says the ceiling under the floor is
    // understated for that kernel, and the floor stands.
    return std::min(1.0, median(found));
  }
  if (used) used->clear();
  return 1;
}

Efficiency parse_efficiency(const std::string& text, const std::string& origin) {
  nlohmann::json doc = model_json::parse_document(text, origin);
  Fields f(doc, origin);
  Efficiency e;
  e.origin = origin;
  e.name = f.text("name");
  e.description = f.text_or("description", "");
  if (f.has("comm_sm_fraction")) {
    Fields sm = f.object("comm_sm_fraction");
    e.comm_sm_fraction = sm.number("value", 0);
    if (e.comm_sm_fraction >= 1) sm.fail_key("value", "a share in [0, 1)");
    e.comm_sm_source = sm.text("source");
    sm.finish();
  }
  f.accept({"comm_sm_fraction", "rows"});
  const nlohmann::json* rows = doc.contains("rows") ? &doc["rows"] : nullptr;
  if (!rows || !rows->is_array() || rows->empty())
    f.fail_key("rows", "a non-empty list of {work, efficiency, kernel, shape, measured, source}");
  for (size_t i = 0; i < rows->size(); ++i) {
    Fields r((*rows)[i], origin + " rows[" + std::to_string(i) + "]");
    EfficiencyRow row;
    row.work = r.text("work");
    row.efficiency = r.number("efficiency", 0);
    if (row.efficiency <= 0 || row.efficiency > kMaxEfficiency)
      r.fail_key("efficiency", "a fraction of the floor in (0, 1.5]");
    row.kernel = r.text("kernel");
    row.shape = r.text("shape");
    row.measured = r.text("measured");
    row.source = r.text("source");
    r.finish();
    e.rows.push_back(row);
  }
  f.finish();
  return e;
}

std::string efficiency_json(const Efficiency& e) {
  using nlohmann::json;
  json rows = json::array();
  for (const EfficiencyRow& r : e.rows)
    rows.push_back({{"work", r.work}, {"efficiency", r.efficiency}, {"kernel", r.kernel},
                    {"shape", r.shape}, {"measured", r.measured}, {"source", r.source}});
  json out = {{"name", e.name}, {"description", e.description}, {"rows", rows}};
  if (e.comm_sm_fraction > 0)
    out["comm_sm_fraction"] = {{"value", e.comm_sm_fraction}, {"source", e.comm_sm_source}};
  return out.dump(2);
}

}  // namespace sol
