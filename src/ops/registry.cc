#include "sol/registry.h"

#include <algorithm>
#include <cctype>
#include <mutex>
#include <sstream>

#include "ops/builtin_ops.h"
#include "sol/device.h"
#include "sol/error.h"

namespace sol {

void OpCase::run_anchor(int) { fail("bench", shape(), ": this case has no anchor to run"); }

namespace {
std::vector<OpInfo>& storage() {
  static std::vector<OpInfo> ops;
  return ops;
}
std::once_flag g_builtins;
// Builtins register on first use: no static-initialiser tricks that a static link would drop.
std::vector<OpInfo>& ops() {
  std::call_once(g_builtins, register_builtin_ops);
  return storage();
}
}  // namespace

void register_op(OpInfo info) {
  check(!info.name.empty() && info.make, "register_op", "an op needs a name and a factory");
  for (const auto& o : storage())
    check(o.name != info.name, "register_op", "op '", info.name, "' is already registered");
  check(info.rows_param.empty() ||
            std::any_of(info.params.begin(), info.params.end(), [&](const ParamSpec& p) { return p.name == info.rows_param; }),
        "register_op", "op '", info.name, "': rows_param '", info.rows_param, "' is not one of its parameters");
  storage().push_back(std::move(info));
}

const std::vector<OpInfo>& registered_ops() { return ops(); }

const OpInfo& find_op(const std::string& name) {
  std::ostringstream known;
  for (const auto& o : ops()) {
    if (o.name == name) return o;
    known << (known.tellp() ? ", " : "") << o.name;
  }
  fail("sol", "unknown op '", name, "'; known ops: ", known.str());
}

OpParams resolve_params(const OpInfo& op, const std::map<std::string, std::string>& given) {
  std::map<std::string, std::string> values;
  for (const auto& p : op.params) values[p.name] = p.default_value;
  for (const auto& [k, v] : given) {
    check(values.count(k) != 0, op.name, "unknown parameter '", k, "'");
    values[k] = v;
  }
  return OpParams(op.name, std::move(values));
}

const std::string& OpParams::text(const std::string& name) const {
  auto it = values_.find(name);
  check(it != values_.end(), op_, "missing parameter '", name, "'");
  return it->second;
}

int64_t OpParams::integer(const std::string& name) const {
  return parse_size(text(name), op_ + ": --" + name);
}

DType OpParams::dtype(const std::string& name) const {
  return parse_dtype(text(name), op_ + ": --" + name);
}

Device OpParams::device(const std::string& name) const {
  const Device d = parse_device(text(name), op_ + ": --" + name);
  if (d.is_cpu()) return d;
  const CudaDiscovery& found = cuda_discovery();
  check(!found.devices.empty(), op_, "--", name, " = ", text(name), " but there is no CUDA device: ", found.reason);
  check(d.index < int(found.devices.size()), op_, "--", name, " = ", text(name), " but there are ",
        found.devices.size(), " CUDA device(s)");
  return d;
}

Device parse_device(const std::string& s, const std::string& what) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  const std::string prefix = "cuda:";
  const std::string digits = s.rfind(prefix, 0) == 0 ? s.substr(prefix.size()) : "";
  const bool numeric = !digits.empty() && digits.size() <= 4 &&
                       std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  check(numeric, what, "expected cpu, cuda or cuda:N but got '", s, "'");
  return Device::cuda(std::stoi(digits));
}

int64_t parse_size(const std::string& s, const std::string& what) {
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  std::string digits = s.substr(0, i), suffix = s.substr(i);
  check(!digits.empty() && digits.size() <= 18, what, " expected a non-negative integer",
        " (suffixes K, M, G) but got '", s, "'");
  int64_t v = std::stoll(digits);
  int shift = 0;
  if (suffix == "K" || suffix == "Ki" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "Mi") shift = 20;
  else if (suffix == "G" || suffix == "Gi") shift = 30;
  else check(suffix.empty(), what, " has unknown suffix in '", s, "' (use K, M or G)");
  check(v <= (INT64_MAX >> shift), what, " value '", s, "' overflows 64 bits");
  return v << shift;
}

}  // namespace sol
