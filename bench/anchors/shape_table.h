#pragma once
// The GEMM shape table (bench/gemm_shapes.json; format in bench/README.md).
#include <cstdint>
#include <string>
#include <vector>

#include "sol/gemm.h"

namespace sol_bench {

struct GemmShape {
  std::string name;
  int64_t n = 0, k = 0;
  sol::Layout layout = sol::Layout::nt;
  std::vector<int64_t> group_m;  // one entry for a plain GEMM; one per expert when grouped
  bool grouped = false;

  int64_t total_m() const;
  double flops() const;  // 2 * sum(m) * n * k
  // "m=16,n=7168,k=2048,nt" or "g8 m=[37,0,...],n=4096,k=7168,nt"
  std::string describe() const;
};

// Reads and validates the table; throws sol::Error naming the file and the entry.
std::vector<GemmShape> load_shape_table(const std::string& path);

// Shapes whose name contains any of the comma-separated `filter` words (all when empty) and
// whose FLOPs do not exceed max_flops (no limit when <= 0).
std::vector<GemmShape> select_shapes(const std::vector<GemmShape>& all, const std::string& filter,
                                     double max_flops);

}  // namespace sol_bench
