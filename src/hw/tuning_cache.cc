// tuning.json: `sol tune`'s winners per CPU, beside machine.json (like FFTW's wisdom). One
// object keyed by a digest of the CPU's identity (hw/cpu_identity.h); each entry repeats the
// identity, so a digest collision or a copied file is caught. Whatever is wrong with the file,
// the defaults apply and a message says why: the cache only saves time, it never stops a run.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/disk_cache.h"
#include "hw/tuning_defaults.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/tuning.h"

namespace sol {

namespace {

using nlohmann::json;

// Bump when a parameter's meaning or the workload that judges it changes: an older entry is
// then stale and ignored.
constexpr int kSchema = 4;

// Applies the entry's parameters over the defaults in t; throws sol::Error on anything stale or
// malformed (the caller then keeps the defaults).
void apply_entry(const json& e, const std::string& identity, Tuning& t) {
  check(e.is_object(), "tuning cache", "the entry is not an object");
  check(e.value("schema", -1) == kSchema, "tuning cache", "schema ", e.value("schema", -1),
        " but this build reads ", kSchema, " (stale: run `sol tune`)");
  check(e.value("cpu_identity", std::string()) == identity, "tuning cache",
        "the entry describes another CPU");
  const json& params = e.at("params");
  check(params.is_object(), "tuning cache", "'params' is not an object");
  TuningParams p = t.params;
  std::vector<TuningChoice> choices = t.choices;
  for (auto it = params.begin(); it != params.end(); ++it) {
    const TuningParamInfo* info = nullptr;
    for (const TuningParamInfo& i : tuning_param_infos())
      if (it.key() == i.name) info = &i;
    check(info != nullptr, "tuning cache", "unknown parameter '", it.key(), "' (stale: run `sol tune`)");
    const json& v = it.value();
    check(v.is_object() && v.contains("value") && v["value"].is_number_integer(), "tuning cache", it.key(),
          " has no integer 'value'");
    p.*info->field = v["value"].get<int64_t>();
    for (TuningChoice& c : choices)
      if (c.name == info->name) {
        c.value = p.*info->field;
        c.tuned = true;
        c.speedup = v.value("speedup", 1.0);
        c.workload = v.value("workload", std::string());
      }
  }
  validate_tuning_params(p);
  t.params = p;
  t.choices = std::move(choices);
  t.source = "tuned " + e.value("tuned_at", std::string("(time unknown)"));
}

}  // namespace

std::string tuning_cache_path() {
  return (std::filesystem::path(machine_cache_path()).parent_path() / "tuning.json").string();
}

Tuning load_tuning(const std::string& path, const std::string& identity, const CoreShape& core,
                   const std::string& mode) {
  Tuning t = default_tuning(core, "defaults");
  if (mode == "defaults") {
    t.source = "defaults (SOL_TUNING=defaults)";
    return t;
  }
  if (path.empty() || !std::filesystem::exists(path)) {
    t.source = "defaults (not tuned: run `sol tune`)";
    return t;
  }
  const json all = json::parse(disk_cache::read_file(path), nullptr, /*allow_exceptions=*/false);
  if (!all.is_object()) {
    t.messages.push_back("ignoring corrupt tuning cache " + path + " (not a JSON object); defaults apply");
    t.source = "defaults (corrupt cache)";
    return t;
  }
  auto entry = all.find(disk_cache::digest(identity));
  if (entry == all.end()) {
    t.source = "defaults (not tuned on this CPU: run `sol tune`)";
    return t;
  }
  Tuning tuned = t;
  try {
    apply_entry(*entry, identity, tuned);
  } catch (const std::exception& e) {
    t.messages.push_back("ignoring tuning cache entry in " + path + ": " + e.what() + "; defaults apply");
    t.source = "defaults (stale or invalid cache)";
    return t;
  }
  tuned.source += " (" + path + ")";
  return tuned;
}

void save_tuning(const std::string& path, const std::string& identity, const std::vector<TuneOutcome>& outcomes) {
  json all = json::parse(disk_cache::read_file(path), nullptr, /*allow_exceptions=*/false);
  if (!all.is_object()) all = json::object();
  json params = json::object();
  for (const TuneOutcome& o : outcomes) {
    json medians = json::object();
    for (const auto& [v, s] : o.medians) medians[std::to_string(v)] = s;
    params[o.param] = {{"value", o.value},       {"default", o.default_value}, {"speedup", o.speedup},
                       {"workload", o.workload}, {"median_seconds", medians}};
  }
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  all[disk_cache::digest(identity)] = {{"schema", kSchema},
                                       {"cpu_identity", identity},
                                       {"cpu_model", cpu_features().model_name},
                                       {"tuned_at", when},
                                       {"params", params}};
  disk_cache::make_dirs(std::filesystem::path(path).parent_path().string(), "tuning cache");
  disk_cache::publish_file(path, all.dump(2) + "\n", "tuning cache");
}

}  // namespace sol
