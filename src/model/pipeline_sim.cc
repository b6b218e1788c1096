// Pipeline schedules run as events, so the closed-form bubbles of the DeepSeek-V3 report can be
// checked against the schedule they describe (and replaced by it where the closed form assumes
// more than the step has: it is exact only for uniform chunks, see docs/model.md).
//
// Each stage runs its own program of passes in order; a pass starts when its stage is free and
// its input is there: a forward needs the previous stage's forward of the same micro-batch, a
// backward the next stage's backward (the last stage: its own forward). Transfers take no time
// here; the step composer has already folded them into F and B.
//
//   1F1B      warm-up forwards (PP-1-stage), then one forward and one full backward in turn.
//   ZB1P      1F1B's order with the backward split into B (input gradient, sent on at once)
//             and W (weight gradient), which waits in a queue and runs in an idle gap it fits
//             in, or when the stage would otherwise exceed 1F1B's PP micro-batches in flight.
//   DualPipe  the eight steps of deepseek-ai/DualPipe's step(): micro-batches enter from both
//             ends, each device holds the stage of either direction, and in the steady state a
//             forward of one direction runs overlapped with a backward of the other (F&B).
#include <algorithm>
#include <deque>
#include <limits>

#include "sol/error.h"
#include "sol/model.h"

namespace sol {

namespace {
constexpr double kNever = std::numeric_limits<double>::infinity();

// A forward (f_mb >= 0), a backward (b_mb >= 0), or both overlapped; `split` marks a backward
// that leaves its weight gradient for a later `weight` pass.
struct Pass {
  enum Kind { forward, backward, weight, forward_backward } kind;
  int f_dir = 0, f_mb = -1, b_dir = 0, b_mb = -1;
  bool split = false;
};

class Simulator {
 public:
  Simulator(int pp, int micro_per_dir, double f, double b, double w, double fb, bool fill_weights)
      : pp_(pp), f_(f), b_(b), w_(w), fb_(fb), fill_(fill_weights),
        programs_(pp), f_end_(2 * pp * micro_per_dir, kNever), b_end_(f_end_),
        micro_(micro_per_dir) {}

  std::vector<Pass>& program(int stage) { return programs_[stage]; }

  PipelineSimulation run() {
    std::vector<size_t> next(pp_, 0);
    std::vector<double> free_at(pp_, 0), busy(pp_, 0);
    std::vector<int> inflight(pp_, 0), peak(pp_, 0);
    std::vector<std::deque<std::pair<int, int>>> pending(pp_);  // deferred W: (dir, mb)
    PipelineSimulation out;
    out.stages.resize(pp_);
    for (;;) {
      int best_stage = -1;
      double best_start = kNever;
      bool best_is_weight = false;
      for (int s = 0; s < pp_; ++s) {
        bool done = next[s] == programs_[s].size();
        if (done && pending[s].empty()) continue;
        double start = kNever;
        bool weight = false;
        if (done) {
          start = free_at[s];
          weight = true;
        } else {
          const Pass& p = programs_[s][next[s]];
          double ready = std::max(free_at[s], ready_time(s, p));
          bool over_cap = fill_ && p.kind == Pass::forward && inflight[s] >= pp_;
          if (!pending[s].empty() && (over_cap || (ready > free_at[s] && ready >= free_at[s] + w_))) {
            start = free_at[s];  // the weight gradient fits in the gap (or memory demands it)
            weight = true;
          } else if (!over_cap) {
            start = ready;
          }
        }
        if (start < best_start) {
          best_start = start;
          best_stage = s;
          best_is_weight = weight;
        }
      }
      if (best_stage < 0) break;
      int s = best_stage;
      double duration = 0;
      PipelinePass record;
      if (best_is_weight) {
        record = {best_start, best_start + w_, 'W', pending[s].front().second,
                  pending[s].front().first};
        pending[s].pop_front();
        duration = w_;
        --inflight[s];
      } else {
        const Pass& p = programs_[s][next[s]++];
        duration = duration_of(p);
        static constexpr char kKinds[] = {'F', 'B', 'W', 'X'};
        record = {best_start, best_start + duration, kKinds[p.kind],
                  p.f_mb >= 0 ? p.f_mb : p.b_mb, p.f_mb >= 0 ? p.f_dir : p.b_dir};
        if (p.f_mb >= 0) peak[s] = std::max(peak[s], ++inflight[s]);
        double end = best_start + duration;
        if (p.f_mb >= 0) f_end(s, p.f_dir, p.f_mb) = end;
        if (p.b_mb >= 0) {
          b_end(s, p.b_dir, p.b_mb) = end;
          if (!p.split) --inflight[s];
          else if (fill_) pending[s].emplace_back(p.b_dir, p.b_mb);
        }
        if (p.kind == Pass::weight) --inflight[s];
      }
      free_at[s] = best_start + duration;
      busy[s] += duration;
      out.stages[s].push_back(record);
    }
    for (int s = 0; s < pp_; ++s)
      check(next[s] == programs_[s].size() && pending[s].empty(), "pipeline simulation",
            "stage ", s, " stalled after ", next[s], " of ", programs_[s].size(),
            " passes (a schedule whose dependencies cannot be met)");
    out.makespan_s = *std::max_element(free_at.begin(), free_at.end());
    for (int s = 0; s < pp_; ++s) {
      out.bubble_s = std::max(out.bubble_s, out.makespan_s - busy[s]);
      out.peak_inflight = std::max(out.peak_inflight, double(peak[s]));
    }
    return out;
  }

 private:
  int position(int stage, int dir) const { return dir == 0 ? stage : pp_ - 1 - stage; }
  int stage_at(int pos, int dir) const { return dir == 0 ? pos : pp_ - 1 - pos; }
  size_t index(int stage, int dir, int mb) const {
    return (size_t(dir) * pp_ + position(stage, dir)) * micro_ + mb;
  }
  double& f_end(int stage, int dir, int mb) { return f_end_[index(stage, dir, mb)]; }
  double& b_end(int stage, int dir, int mb) { return b_end_[index(stage, dir, mb)]; }

  // When the inputs of a pass are there (kNever: not scheduled yet).
  double ready_time(int s, const Pass& p) {
    double ready = 0;
    if (p.f_mb >= 0) {
      int pos = position(s, p.f_dir);
      if (pos > 0) ready = std::max(ready, f_end(stage_at(pos - 1, p.f_dir), p.f_dir, p.f_mb));
    }
    if (p.b_mb >= 0) {
      int pos = position(s, p.b_dir);
      double grad = pos == pp_ - 1 ? f_end(s, p.b_dir, p.b_mb)
                                   : b_end(stage_at(pos + 1, p.b_dir), p.b_dir, p.b_mb);
      ready = std::max(ready, grad);
    }
    return ready;
  }

  double duration_of(const Pass& p) const {
    switch (p.kind) {
      case Pass::forward: return f_;
      case Pass::backward: return p.split ? b_ - w_ : b_;
      case Pass::weight: return w_;
      case Pass::forward_backward: return fb_;
    }
    return 0;
  }

  int pp_;
  double f_, b_, w_, fb_;
  bool fill_;
  std::vector<std::vector<Pass>> programs_;
  std::vector<double> f_end_, b_end_;
  int micro_;
};

// 1F1B's order of forwards and backwards on each stage.
void one_f_one_b_programs(Simulator& sim, int pp, int micro, bool split) {
  for (int s = 0; s < pp; ++s) {
    std::vector<Pass>& prog = sim.program(s);
    int warm = std::min(pp - 1 - s, micro), next_f = 0, next_b = 0;
    for (; next_f < warm; ++next_f) prog.push_back({Pass::forward, 0, next_f});
    while (next_b < micro) {
      if (next_f < micro) prog.push_back({Pass::forward, 0, next_f++});
      Pass b{Pass::backward};
      b.b_mb = next_b++;
      b.split = split;
      prog.push_back(b);
    }
  }
}

// DualPipe, following the eight steps of deepseek-ai/DualPipe (dualpipe.py, step()). "Phase 0"
// is the direction whose micro-batches enter at the device's nearer end.
void dualpipe_programs(Simulator& sim, int pp, int micro) {
  int half = pp / 2, half_micro = micro / 2;
  for (int rank = 0; rank < pp; ++rank) {
    int hr = std::min(rank, pp - 1 - rank);
    bool middle = hr == half - 1;
    int near = rank < half ? 0 : 1;
    auto dir = [&](int phase) { return phase == 0 ? near : 1 - near; };
    std::vector<Pass>& prog = sim.program(rank);
    int next_f[2] = {0, 0}, next_b[2] = {0, 0};
    std::deque<std::pair<int, int>> weights;
    auto F = [&](int phase) {
      int d = dir(phase);
      prog.push_back({Pass::forward, d, next_f[d]++});
    };
    auto B = [&](int phase, bool split) {
      int d = dir(phase);
      Pass p{Pass::backward};
      p.b_dir = d;
      p.b_mb = next_b[d]++;
      p.split = split;
      if (split) weights.emplace_back(d, p.b_mb);
      prog.push_back(p);
    };
    auto W = [&] {
      Pass p{Pass::weight};
      p.b_dir = weights.front().first;
      p.b_mb = -1;
      weights.pop_front();
      prog.push_back(p);
    };
    auto FB = [&](int f_phase, int b_phase) {
      int fd = dir(f_phase), bd = dir(b_phase);
      Pass p{Pass::forward_backward, fd, next_f[fd]++, bd, next_b[bd]++};
      prog.push_back(p);
    };
    for (int i = 0; i < (half - hr - 1) * 2; ++i) F(0);                 // 1: nF0
    for (int i = 0; i < hr + 1; ++i) { F(0); F(1); }                    // 2: nF0F1
    for (int i = 0; i < half - hr - 1; ++i) { B(1, true); W(); F(1); }  // 3: nB1W1F1
    for (int i = 0; i < half_micro - pp + hr + 1; ++i) {                // 4: nF0B1F1B0
      if (i == 0 && middle) { F(0); B(1, false); }  // not overlapped, as DualPipe does
      else FB(0, 1);
      FB(1, 0);
    }
    for (int i = 0; i < half - hr - 1; ++i) { B(1, false); FB(1, 0); }  // 5: nB1F1B0
    bool split = false;                                                 // 6: nB1B0
    for (int i = 0, n = hr + 1; i < n; ++i) {
      if (i == n / 2 && hr % 2 == 1) split = true;
      B(1, split);
      if (i == n / 2 && hr % 2 == 0) split = true;
      B(0, split);
    }
    for (int i = 0; i < half - hr - 1; ++i) { W(); B(0, true); }        // 7: nWB0
    for (int i = 0; i < hr + 1; ++i) W();                               // 8: nW
    check(weights.empty() && next_f[0] == half_micro && next_f[1] == half_micro &&
              next_b[0] == half_micro && next_b[1] == half_micro,
          "pipeline simulation", "dualpipe program of rank ", rank, " is incomplete");
  }
}
}  // namespace

PipelineSimulation simulate_pipeline(Schedule schedule, int pp, int micro_batches, double f,
                                     double b, double w, double fb) {
  check(pp >= 1 && micro_batches >= 1, "pipeline simulation", "pp = ", pp,
        " and micro_batches = ", micro_batches, " must be >= 1");
  check(f >= 0 && b >= 0 && fb >= 0 && w >= 0 && w <= b, "pipeline simulation",
        "times must be >= 0 with w <= b, got f = ", f, ", b = ", b, ", w = ", w, ", fb = ", fb);
  switch (schedule) {
    case Schedule::one_f_one_b:
    case Schedule::zb1p: {
      bool zb = schedule == Schedule::zb1p;
      Simulator sim(pp, micro_batches, f, b, w, fb, zb);
      one_f_one_b_programs(sim, pp, micro_batches, zb);
      return sim.run();
    }
    case Schedule::dualpipe: {
      check(pp % 2 == 0 && micro_batches % 2 == 0 && micro_batches >= 2 * pp,
            "pipeline simulation", "dualpipe needs an even pp and an even micro_batches >= 2 x pp,"
            " got pp = ", pp, ", micro_batches = ", micro_batches);
      Simulator sim(pp, micro_batches / 2, f, b, w, fb, false);
      dualpipe_programs(sim, pp, micro_batches);
      return sim.run();
    }
  }
  fail("pipeline simulation", "unknown schedule");
}

}  // namespace sol
