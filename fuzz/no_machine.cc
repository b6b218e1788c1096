// hardware_spec.cc turns a measured machine into a spec (`--hw this`); the JSON harness never
// asks for one, so the machine profile's lookup is a stand-in here rather than all of src/hw.
#include <cstdlib>

#include "sol/hw.h"

namespace sol {
const Ceiling& MachineProfile::get(Unit) const { std::abort(); }
}  // namespace sol
