// The tuning a run gets when no cache entry applies: the parameters derived from the core's
// shape, each choice recorded as its own default.
#pragma once

#include <string>

#include "sol/tuning.h"

namespace sol {

Tuning default_tuning(const CoreShape& core, std::string source);

}  // namespace sol
