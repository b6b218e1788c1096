#pragma once
// One shape at one dtype: the inputs every implementation reads, and the interface each
// implementation (Sol or an anchor) is wrapped in.
//
// Inputs come in `sets` identical-shaped copies with different values: a case whose bytes would
// stay in the last-level cache between runs rotates through sets that together outgrow it (as
// sol bench does), since the memory floor is taken at DRAM bandwidth.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shape_table.h"
#include "sol/dtype.h"
#include "sol/tensor.h"

namespace sol_bench {

struct GemmCase {
  GemmShape shape;
  sol::DType in = sol::DType::f32;   // A and B
  sol::DType out = sol::DType::f32;  // D
  int sets = 1;
  // a[set][group] is [group_m, k]; b[set][group] is [n, k] (nt) or [k, n] (nn). Empty groups
  // (no rows) hold empty buffers: nobody multiplies by an expert that received no token.
  std::vector<std::vector<sol::Buffer>> a, b;

  int groups() const { return int(shape.group_m.size()); }
  int64_t m(int g) const { return shape.group_m[size_t(g)]; }
  // Bytes of one set: each input read once, D written once (empty experts' weights not counted).
  double bytes() const;
};

// Random values in [-1, 1) (int8: [-127, 127]), a fixed seed per set, group and operand.
GemmCase make_case(const GemmShape& shape, sol::DType in, sol::DType out, int64_t cold_bytes);

// An implementation prepared for one case at one thread count: weights already in its own
// layout (packed / reordered once), outputs allocated. run() multiplies every non-empty group
// of one input set.
class GemmRunner {
 public:
  virtual ~GemmRunner() = default;
  virtual void run(int set) = 0;
  // D of set 0, group g (as the implementation wrote it; any float dtype).
  virtual sol::Tensor output(int g) const = 0;
  // What the library chose (e.g. oneDNN's implementation name); may be empty.
  virtual std::string detail() const { return {}; }
};

// ||x - y|| / ||y|| over every group's output, in double.
double relative_error(const GemmRunner& x, const GemmRunner& y, const GemmCase& c);

}  // namespace sol_bench
