#pragma once
// A machine profile with every unit at one round rate, so a test of floors, benches or the model
// never measures this (shared, noisy) machine and never depends on how busy it is.
#include "sol/hw.h"

namespace sol::testing_hw {

inline MachineProfile flat_profile(double one_thread, double all_threads, int cores = 2) {
  MachineProfile m;
  m.cpu_model = "test";
  m.cores = cores;
  for (Unit u : kAllUnits) m.ceilings.push_back({u, true, "test", one_thread, all_threads, cores});
  return m;
}

}  // namespace sol::testing_hw
