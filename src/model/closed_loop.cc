// Closing the loop: predict Sol's own measured ops on this machine and report the error.
// Nothing of a record's own time enters its prediction (leave-one-out): what it uses is its
// floor, the times of *other* records, and its own in-cache run, a separate measurement.
#include <algorithm>
#include <cmath>

#include "sol/error.h"
#include "sol/model.h"
#include "sol/model_loop.h"
#include "sol/roofline.h"

namespace sol {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

// A sample whose median run took this much longer than its fastest was cut into by the
// scheduler in most runs; its ceiling moved past this between its measurements, its floor is
// uncertain (docs/ARCHITECTURE.md, decision 15).
constexpr double kScheduledOutRatio = 1.5, kCeilingMovedLimit = 1.2;
// Floors within this factor are one size regime: a 16-row norm pays per-call costs and the read
// for ownership of its output that a 4096-row one spreads out; a 16-row GEMM streams its weights.
constexpr double kRegimeFactor = 4;
// An op whose measured time is at least this multiple of its own code's in-cache time waits on
// memory for a sixth of it or more: its efficiency is the memory system's for its size. Twice
// the ~10% spread of repeated runs, so that noise alone does not put an op in or out.
constexpr double kMemoryLimitedRatio = 1.2;

std::string why_dropped(const LoopRecord& m) {
  if (m.min_s > 0 && m.measured_s > kScheduledOutRatio * m.min_s)
    return "cut by the scheduler (median " + std::to_string(m.measured_s / m.min_s) + "x the fastest run)";
  if (m.ceiling_moved > kCeilingMovedLimit) return "its paired ceiling moved during the run";
  return "";
}

bool same_regime(double a, double b) { return a <= kRegimeFactor * b && b <= kRegimeFactor * a; }

struct Records {
  const std::vector<LoopRecord>& ops;
  std::vector<double> floors;
  std::vector<bool> usable;
  std::vector<std::string> classes;  // the efficiency layer's work class (GEMM: dtype, shape)

  // Records that may be i's peers: usable, the same thread count, `extra`, and not i's own case
  // measured again (the same op, shape and dtype in another run is its own time, not a peer's).
  template <class Pred>
  std::vector<size_t> others(size_t i, Pred extra) const {
    std::vector<size_t> out;
    for (size_t j = 0; j < ops.size(); ++j) {
      const bool same_case = ops[j].op == ops[i].op && ops[j].shape == ops[i].shape && ops[j].dtype == ops[i].dtype;
      if (!same_case && usable[j] && ops[j].threads == ops[i].threads && extra(j)) out.push_back(j);
    }
    return out;
  }
};

using Level = std::pair<const char*, std::vector<size_t>>;

std::vector<size_t> nearest(const std::vector<Level>& levels, std::string& regime) {
  for (const auto& [name, set] : levels)
    if (!set.empty()) {
      regime = name;
      return set;
    }
  regime.clear();
  return {};
}

// Memory-bound ops of any kind whose time is memory access (measured well above their own code's
// in-cache time; j is never i): the DRAM efficiency of the size regime, then of any size.
std::vector<Level> dram_levels(const Records& r, size_t i) {
  auto limited = [&](size_t j) {
    const LoopRecord& m = r.ops[j];
    return m.bound == "memory" && m.in_cache_s > 0 && m.measured_s >= kMemoryLimitedRatio * m.in_cache_s;
  };
  return {{"dram size", r.others(i, [&](size_t j) { return limited(j) && same_regime(r.floors[j], r.floors[i]); })},
          {"dram", r.others(i, limited)}};
}

// The other measurements of the same op, nearest first. Compute-bound: the same unit and work
// class (a GEMM's dtype and shape class: decode, mid, large), the same unit, the op. Memory-
// bound: the same bound and size regime, the same bound, the op.
std::vector<Level> same_op_levels(const Records& r, size_t i) {
  const LoopRecord& m = r.ops[i];
  auto op = [&](size_t j) { return r.ops[j].op == m.op; };
  auto bound = [&](size_t j) { return op(j) && r.ops[j].bound == m.bound; };
  if (m.bound == "compute") {
    auto unit = [&](size_t j) { return bound(j) && r.ops[j].compute == m.compute; };
    return {{"class", r.others(i, [&](size_t j) { return unit(j) && r.classes[j] == r.classes[i]; })},
            {"unit", r.others(i, unit)},
            {"op", r.others(i, op)}};
  }
  return {{"size", r.others(i, [&](size_t j) { return bound(j) && same_regime(r.floors[j], r.floors[i]); })},
          {"bound", r.others(i, bound)},
          {"op", r.others(i, op)}};
}

// A compute-bound op no other record of its own shares: the compute-bound ops of its unit.
Level other_ops_level(const Records& r, size_t i) {
  return {"unit, other ops", r.others(i, [&](size_t j) {
            return r.ops[j].bound == "compute" && r.ops[j].compute == r.ops[i].compute;
          })};
}

std::vector<size_t> peers_of(const Records& r, size_t i, std::string& regime) {
  const LoopRecord& m = r.ops[i];
  std::vector<Level> levels;
  auto append = [&](std::vector<Level> more) { levels.insert(levels.end(), more.begin(), more.end()); };
  if (m.bound == "compute") {
    append(same_op_levels(r, i));
    levels.push_back(other_ops_level(r, i));
  } else if (m.in_cache_s > 0) {
    append(dram_levels(r, i));  // its own code is accounted for by its in-cache time
    append(same_op_levels(r, i));
  } else {
    // Without an in-cache time the op's code is known only through its own kind: the same op
    // of its size first, then the memory system's efficiency.
    std::vector<Level> own = same_op_levels(r, i);
    levels.push_back(own[0]);
    append(dram_levels(r, i));
    levels.insert(levels.end(), own.begin() + 1, own.end());
  }
  return nearest(levels, regime);
}

}  // namespace

std::vector<PredictedOp> predict_loop(const MachineProfile& machine, const std::vector<LoopRecord>& ops) {
  Records r{ops, {}, {}, {}};
  std::vector<std::string> dropped;
  for (const auto& m : ops) {
    Cost c{m.flops, m.bytes, m.compute, m.memory, m.read_bytes};
    r.floors.push_back(roofline_floor(c, machine, m.threads).floor_s);
    // An op with no work has no floor and no efficiency to lend.
    dropped.push_back(r.floors.back() > 0 ? why_dropped(m) : "no work: its floor is 0");
    r.usable.push_back(dropped.back().empty());
    r.classes.push_back(sol_op_work_class(m.op, m.dtype, m.shape, m.bound));
  }
  std::vector<PredictedOp> out;
  for (size_t i = 0; i < ops.size(); ++i) {
    PredictedOp p;
    p.measured = ops[i];
    p.floor_s = r.floors[i];
    p.dropped = dropped[i];
    if (!p.dropped.empty()) {
      out.push_back(p);
      continue;
    }
    std::vector<double> eff;
    for (size_t j : peers_of(r, i, p.regime)) eff.push_back(r.floors[j] / ops[j].measured_s);
    p.peers = int(eff.size());
    p.single_peer = p.peers == 1;
    if (!eff.empty()) {
      p.peer_efficiency = median(eff);
      p.predicted_s = p.floor_s / p.peer_efficiency;
      if (ops[i].bound == "memory" && ops[i].in_cache_s > p.predicted_s) {
        p.predicted_s = ops[i].in_cache_s;
        p.in_cache_bound = true;
      }
      p.efficiency = p.floor_s / p.predicted_s;
      p.error_pct = 100.0 * (p.predicted_s - ops[i].measured_s) / ops[i].measured_s;
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace sol
