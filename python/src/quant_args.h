#pragma once
// Arguments shared by every op that writes DeepSeek FP8 (q, scales).
#include <string>

#include "arrays.h"
#include "sol/quant.h"

namespace solpy {

sol::QuantOptions quant_options(int64_t group, const std::string& scale_format, const char* op);

struct QuantOutputs {
  Array q, scales;
  nb::tuple result() const { return nb::make_tuple(q.object, scales.object); }
};
// q [rows, cols] f8e4m3 and scales [scale_rows, cols / group] f32, each the caller's or new.
QuantOutputs quant_outputs(nb::handle q, nb::handle scales, const char* op, int64_t rows, int64_t cols,
                           int64_t scale_rows, int64_t group);

}  // namespace solpy
