#include "shape_table.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "sol/error.h"

namespace sol_bench {

int64_t GemmShape::total_m() const {
  int64_t m = 0;
  for (int64_t g : group_m) m += g;
  return m;
}

double GemmShape::flops() const { return 2.0 * double(total_m()) * double(n) * double(k); }

std::string GemmShape::describe() const {
  std::ostringstream os;
  if (grouped) {
    os << "g" << group_m.size() << " m=[";
    for (size_t i = 0; i < group_m.size(); ++i) os << (i ? "," : "") << group_m[i];
    os << "]";
  } else {
    os << "m=" << group_m.at(0);
  }
  os << ",n=" << n << ",k=" << k << "," << (layout == sol::Layout::nn ? "nn" : "nt");
  return os.str();
}

namespace {

int64_t positive_size(const nlohmann::json& e, const char* key, const std::string& where, bool allow_zero) {
  sol::check(e.contains(key) && e[key].is_number_integer(), "gemm_shapes", where, ": '", key,
             "' must be an integer");
  int64_t v = e[key].get<int64_t>();
  sol::check(allow_zero ? v >= 0 : v > 0, "gemm_shapes", where, ": '", key, "' = ", v, " but must be ",
             allow_zero ? ">= 0" : "> 0");
  return v;
}

}  // namespace

std::vector<GemmShape> load_shape_table(const std::string& path) {
  std::ifstream in(path);
  sol::check(bool(in), "gemm_shapes", "cannot open '", path, "'");
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    sol::fail("gemm_shapes", path, ": not valid JSON: ", e.what());
  }
  sol::check(doc.contains("shapes") && doc["shapes"].is_array(), "gemm_shapes", path,
             ": expected an object with a 'shapes' array");
  std::vector<GemmShape> shapes;
  std::set<std::string> names;
  for (const auto& e : doc["shapes"]) {
    const std::string where = path + " entry " + std::to_string(shapes.size());
    sol::check(e.is_object() && e.contains("name") && e["name"].is_string(), "gemm_shapes", where,
               ": every entry needs a 'name' string");
    GemmShape s;
    s.name = e["name"].get<std::string>();
    sol::check(names.insert(s.name).second, "gemm_shapes", where, ": name '", s.name, "' is used twice");
    const std::string at = path + " '" + s.name + "'";
    s.n = positive_size(e, "n", at, false);
    s.k = positive_size(e, "k", at, false);
    const std::string layout = e.value("layout", std::string("nt"));
    sol::check(layout == "nn" || layout == "nt", "gemm_shapes", at, ": layout = '", layout,
               "' but must be nn or nt");
    s.layout = layout == "nn" ? sol::Layout::nn : sol::Layout::nt;
    s.grouped = e.contains("group_m");
    sol::check(s.grouped != e.contains("m"), "gemm_shapes", at, ": give exactly one of 'm' and 'group_m'");
    if (s.grouped) {
      sol::check(e["group_m"].is_array() && !e["group_m"].empty(), "gemm_shapes", at,
                 ": 'group_m' must be a non-empty array of row counts");
      for (const auto& g : e["group_m"]) {
        sol::check(g.is_number_integer() && g.get<int64_t>() >= 0, "gemm_shapes", at,
                   ": 'group_m' entries must be integers >= 0");
        s.group_m.push_back(g.get<int64_t>());
      }
    } else {
      s.group_m = {positive_size(e, "m", at, false)};
    }
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::vector<GemmShape> select_shapes(const std::vector<GemmShape>& all, const std::string& filter,
                                     double max_flops) {
  std::vector<std::string> words;
  std::stringstream ss(filter);
  for (std::string w; std::getline(ss, w, ',');)
    if (!w.empty()) words.push_back(w);
  std::vector<GemmShape> out;
  for (const GemmShape& s : all) {
    bool named = words.empty();
    for (const std::string& w : words) named = named || s.name.find(w) != std::string::npos;
    if (named && (max_flops <= 0 || s.flops() <= max_flops)) out.push_back(s);
  }
  return out;
}

}  // namespace sol_bench
