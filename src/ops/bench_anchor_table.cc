// The anchor's columns in `sol bench`'s table (bench.h): Sol and its anchor on one row, each held
// to the same floor. Here rather than in the CLI so that the host tests read the same text.
#include <cmath>
#include <cstdio>
#include <set>
#include <utility>

#include "sol/bench.h"

namespace sol {

namespace {
constexpr const char* kCells = " %10s %9s %8s";

std::string cells(const char* time, const char* sol, const char* speedup) {
  char text[64];
  std::snprintf(text, sizeof(text), kCells, time, sol, speedup);
  return text;
}
}  // namespace

std::string anchor_table_header() { return cells("anchor", "anchor%", "Sol/anc"); }

std::string anchor_table_cells(const BenchRecord& r) {
  if (!r.anchor) return cells("-", "-", "-");
  char time[32], sol[32], speedup[32];
  std::snprintf(time, sizeof(time), "%.3fms", r.anchor->timing.median_s * 1e3);
  if (std::isnan(r.anchor->sol_pct)) std::snprintf(sol, sizeof(sol), "-");
  else std::snprintf(sol, sizeof(sol), "%.1f", r.anchor->sol_pct);
  const double x = anchor_speedup(r);
  if (std::isnan(x)) std::snprintf(speedup, sizeof(speedup), "-");
  else std::snprintf(speedup, sizeof(speedup), "%.2fx", x);
  return cells(time, sol, speedup);
}

std::string anchor_table_legend(const std::vector<BenchRecord>& records) {
  std::set<std::pair<std::string, std::string>> named;  // (dtype, anchor), each once
  std::string out;
  for (const BenchRecord& r : records)
    if (r.anchor && named.insert({r.dtype, r.anchor->name}).second)
      out += "anchor of " + r.op + " " + r.dtype + ": " + r.anchor->name + "\n";
  if (!out.empty())
    out += "anchor: its median time; anchor%: its SOL% against the same floor; Sol/anc: its time over Sol's "
           "(> 1: Sol is faster)\n";
  return out;
}

}  // namespace sol
