#pragma once
// Closing the loop on this machine (`sol model loop`, docs/model.md): each op that `sol report`
// or `sol bench --json` measured is predicted from evidence that never includes its own
// measured time (leave-one-out), then compared with what was measured:
// - a memory-bound op: the slower of its bytes at the DRAM efficiency of the *other* memory-
//   bound ops of its size regime whose time is memory access (measured at least 1.2x their own
//   in-cache time), and its own code timed in cache (a separate measurement of the same op
//   shrunk into L2), scaled to its size;
// - a compute-bound op (or a memory-bound one without an in-cache time): the median efficiency
//   of the other measurements of the same op, nearest first (same unit and shape class).
// Samples the scheduler cut into are neither predicted nor peers; the same case measured again
// (another run of the same op, shape and dtype) is never a peer.
#include <string>
#include <vector>

#include "sol/hw.h"

namespace sol {

// One measured op as the loop reads it.
struct LoopRecord {
  std::string op, shape, dtype;
  int threads = 1;
  double flops = 0, bytes = 0;
  double read_bytes = 0;     // of bytes, those read (0: the floor has no read/write terms)
  Unit compute = Unit::fma_f32, memory = Unit::mem_copy;
  double measured_s = 0;
  double min_s = 0;          // fastest run (0: unknown)
  double ceiling_moved = 1;  // how far the paired ceiling moved during the run
  std::string bound;         // compute or memory, as measured
  // The op's code timed with its data in L2 (the same op at fewer rows, a separate run),
  // scaled to this shape by the ratio of the two floors; 0: not measured.
  double in_cache_s = 0;
};
struct PredictedOp {
  LoopRecord measured;
  double floor_s = 0;      // on the report's cached ceilings
  double efficiency = 0;   // floor / predicted; 0 when the op has no peer
  int peers = 0;
  // Which peers: "dram size" / "dram" (memory-limited ops of any kind, floor within 4x / any);
  // the same op's "class" (compute unit and work class), "unit", "size" (memory-bound, floor
  // within 4x), "bound", "op"; "unit, other ops" (compute-bound ops of the unit); "" for none.
  std::string regime;
  double peer_efficiency = 0;  // the peers' median floor / time
  bool in_cache_bound = false;  // the op's own in-cache time, slower than its memory, set it
  bool single_peer = false;  // one peer only: the prediction is that peer's efficiency
  std::string dropped;     // why the sample is left out ("" when it is not)
  double predicted_s = 0;  // the larger of floor / peer_efficiency and in_cache_s
  double error_pct = 0;    // 100 * (predicted - measured) / measured
};
// Reads report.json (as `sol report` writes it), or the array of records `sol bench --json`
// prints (then `machine` is left as the caller set it: the cached profile); throws sol::Error
// naming the file and key. Of each record's timing it reads time_s, min_s and nothing derived
// from them (sol_pct, gbps, tflops are ignored).
void read_loop_records(const std::string& path, MachineProfile& machine, std::vector<LoopRecord>& ops);
std::vector<PredictedOp> predict_loop(const MachineProfile& machine, const std::vector<LoopRecord>& ops);

}  // namespace sol
