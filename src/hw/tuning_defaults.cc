#include "hw/tuning_defaults.h"

#include <utility>

namespace sol {

Tuning default_tuning(const CoreShape& core, std::string source) {
  Tuning t;
  t.core = core;
  t.params = default_tuning_params(core);
  for (const TuningParamInfo& i : tuning_param_infos()) {
    TuningChoice c;
    c.name = i.name;
    c.value = c.default_value = t.params.*i.field;
    t.choices.push_back(c);
  }
  t.source = std::move(source);
  return t;
}

#ifdef SOL_DEVICE_MINIMAL
// A SOL_DEVICE_MINIMAL build has no JSON reader (tuning_cache.cc is left out), so it never
// reads tuning.json: the defaults apply, and `source` says why.
std::string tuning_cache_path() { return {}; }

Tuning load_tuning(const std::string&, const std::string&, const CoreShape& core, const std::string& mode) {
  return default_tuning(core, mode == "defaults" ? "defaults (SOL_TUNING=defaults)"
                                                 : "defaults (a SOL_DEVICE_MINIMAL build reads no tuning cache)");
}
#endif

}  // namespace sol
