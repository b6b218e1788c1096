#pragma once
// One PackedMatrix per expert (or per head), packed once by sol.pack_experts: what the grouped
// GEMMs and mla_decode_absorbed take as a Python object.
#include <vector>

#include "sol/gemm.h"

namespace solpy {

struct PackedExperts {
  std::vector<sol::PackedMatrix> experts;
  PackedExperts() = default;
  PackedExperts(const PackedExperts&) = delete;  // std::vector would claim to be copyable
  PackedExperts& operator=(const PackedExperts&) = delete;
};

}  // namespace solpy
