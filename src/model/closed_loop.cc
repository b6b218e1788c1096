// Closing the loop: predict Sol's own measured ops on this machine and report the error.
// Nothing of a record's own time enters its prediction (leave-one-out): what it uses is its
// floor, the times of *other* records, and its own in-cache run, a separate measurement.
#include <algorithm>
#include <cmath>

#include "model/sample_rules.h"
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

using model_detail::why_not_evidence;
// Floors within this factor are one size regime: a 16-row norm pays per-call costs and the read
// for ownership of its output that a 4096-row one spreads out; a 16-row GEMM streams its weights.
constexpr double kRegimeFactor = 4;
// An op whose measured time is at least this multiple of its own code's in-cache time waits on
// memory for a sixth of it or more: its efficiency is the memory system's for its size. Twice
// the ~10% spread of repeated runs, so that noise alone does not put an op in or out.
constexpr double kMemoryLimitedRatio = 1.2;
// Write shares of an op's bytes within this of each other are one read/write mix. The floor's
// copy term holds the copy's even mix; an op that writes twice what it reads (a widening cast)
// measures above it, one that reads four times what it writes below: ops of one mix share the
// error of their floor, ops of different mixes do not.
constexpr double kMixTolerance = 0.1;

std::string why_dropped(const LoopRecord& m) { return why_not_evidence(m.measured_s, m.min_s, m.ceiling_moved); }

bool same_regime(double a, double b) { return a <= kRegimeFactor * b && b <= kRegimeFactor * a; }

// The share of an op's bytes it writes; -1 when its floor does not split reads from writes.
double write_share(const LoopRecord& m) {
  if (m.memory == Unit::mem_read) return 0;
  if (m.read_bytes <= 0 || m.bytes <= 0) return -1;
  return (m.bytes - m.read_bytes) / m.bytes;
}

// Unknown mixes are no match: an op whose floor does not split its bytes goes to the size regime.
bool same_mix(const LoopRecord& a, const LoopRecord& b) {
  const double wa = write_share(a), wb = write_share(b);
  return wa >= 0 && wb >= 0 && std::fabs(wa - wb) <= kMixTolerance;
}

// The last part of a work class: a GEMM's shape class (gemm.bf16.decode -> decode), attention's
// pass (attention.fwd -> fwd).
std::string shape_part(const std::string& work_class) { return work_class.substr(work_class.rfind('.') + 1); }

struct Records {
  const std::vector<LoopRecord>& ops;
  std::vector<double> floors;
  std::vector<bool> usable;
  std::vector<std::string> classes;  // the efficiency layer's work class (GEMM: dtype, shape)
  std::vector<std::string> dtypes;   // the dtype the kernel computes in

  // A kernel: its op, compute unit and compute dtype (a CPU FP8 GEMM converts its operands and
  // then runs the bf16 unit: its efficiency against that unit is not a bf16 GEMM's).
  bool same_kernel(size_t i, size_t j) const {
    return ops[j].op == ops[i].op && ops[j].compute == ops[i].compute && dtypes[j] == dtypes[i];
  }
  bool kernel_op(size_t j) const { return classes[j] != "memory"; }

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
// in-cache time; j is never i): the DRAM efficiency of the size regime and read/write mix, of the
// size regime, then of any size.
std::vector<Level> dram_levels(const Records& r, size_t i) {
  auto limited = [&](size_t j) {
    const LoopRecord& m = r.ops[j];
    return m.bound == "memory" && m.in_cache_s > 0 && m.measured_s >= kMemoryLimitedRatio * m.in_cache_s;
  };
  auto sized = [&](size_t j) { return limited(j) && same_regime(r.floors[j], r.floors[i]); };
  return {{"dram size mix", r.others(i, [&](size_t j) { return sized(j) && same_mix(r.ops[j], r.ops[i]); })},
          {"dram size", r.others(i, sized)},
          {"dram", r.others(i, limited)}};
}

// The other measurements of the same op, nearest first (an op outside the work classes of
// kernel_levels). Compute-bound: the same unit and work class, the same unit, the op. Memory-
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

// A GEMM, grouped GEMM, attention or MLA decode: its own kernel, whichever side of the roofline its
// floor lands on (a 128-row AMX GEMM has a memory floor but does not stream): the same work class,
// the kernel at other shapes, then the kernel of its shape class in the other op that runs it (a
// grouped GEMM runs the dense GEMM's micro-kernel per group).
std::vector<Level> kernel_levels(const Records& r, size_t i) {
  auto kernel = [&](size_t j) { return r.same_kernel(i, j); };
  return {{"class", r.others(i, [&](size_t j) { return kernel(j) && r.classes[j] == r.classes[i]; })},
          {"kernel", r.others(i, kernel)},
          {"kernel, other op", r.others(i, [&](size_t j) {
             return r.kernel_op(j) && r.ops[j].op != r.ops[i].op && r.ops[j].compute == r.ops[i].compute &&
                    r.dtypes[j] == r.dtypes[i] && shape_part(r.classes[j]) == shape_part(r.classes[i]);
           })}};
}

// A compute-bound op no other record of its own shares: the compute-bound ops of its unit.
Level other_ops_level(const Records& r, size_t i) {
  return {"unit, other ops", r.others(i, [&](size_t j) {
            return r.ops[j].bound == "compute" && r.ops[j].compute == r.ops[i].compute && r.dtypes[j] == r.dtypes[i];
          })};
}

// The last resort: the op at any unit, dtype or size.
Level any_op_level(const Records& r, size_t i) {
  return {"op", r.others(i, [&](size_t j) { return r.ops[j].op == r.ops[i].op; })};
}

std::vector<size_t> peers_of(const Records& r, size_t i, std::string& regime) {
  const LoopRecord& m = r.ops[i];
  std::vector<Level> levels;
  auto append = [&](std::vector<Level> more) { levels.insert(levels.end(), more.begin(), more.end()); };
  if (r.kernel_op(i)) {
    append(kernel_levels(r, i));
    if (m.bound == "compute")
      levels.push_back(other_ops_level(r, i));
    else
      append(dram_levels(r, i));  // a weight-streaming GEMM no kernel of its own was measured beside
    levels.push_back(any_op_level(r, i));
  } else if (m.bound == "compute") {
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
  Records r{ops, {}, {}, {}, {}};
  std::vector<std::string> dropped;
  for (const auto& m : ops) {
    Cost c{m.flops, m.bytes, m.compute, m.memory, m.read_bytes};
    r.floors.push_back(roofline_floor(c, machine, m.threads).floor_s);
    // An op with no work has no floor and no efficiency to lend.
    dropped.push_back(r.floors.back() > 0 ? why_dropped(m) : "no work: its floor is 0");
    r.usable.push_back(dropped.back().empty());
    r.classes.push_back(sol_op_work_class(m.op, m.dtype, m.shape, m.bound));
    r.dtypes.push_back(sol_op_compute_dtype(m.dtype));
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
