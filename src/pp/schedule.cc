// Pipeline schedules as per-rank action lists, and the bubble each one predicts.
//
// DualPipe follows the eight steps of DeepSeek's published schedule (DeepSeek-V3 report,
// section 3.2.1, and its public reference schedule): rank r holds stage r of direction 0 and
// stage P-1-r of direction 1; on ranks of the second half "phase 0" names direction 1, so the
// same step list serves both halves. An overlapped F&B pair becomes F then B (compute is
// sequential here); a backward with the zero-bubble split defers its weight pass to a queue
// that later W steps pop, otherwise the weight pass follows the backward at once.
#include <deque>
#include <string>

#include "sol/error.h"
#include "sol/pp.h"

namespace sol::pp {

std::string_view schedule_name(Schedule s) { return s == Schedule::dualpipe ? "dualpipe" : "1f1b"; }

Schedule parse_schedule(std::string_view name) {
  if (name == "1f1b") return Schedule::one_f_one_b;
  if (name == "dualpipe") return Schedule::dualpipe;
  fail("pp", "schedule '", name, "' is unknown: expected 1f1b or dualpipe");
}

namespace {

std::vector<Action> one_f_one_b(int ranks, int rank, int m) {
  std::vector<Action> a;
  const int warm = std::min(ranks - 1 - rank, m);
  for (int i = 0; i < warm; ++i) a.push_back({Action::forward, 0, i});
  for (int i = 0; i < m - warm; ++i) {
    a.push_back({Action::forward, 0, warm + i});
    a.push_back({Action::backward_input, 0, i});
    a.push_back({Action::backward_weight, 0, i});
  }
  for (int i = m - warm; i < m; ++i) {
    a.push_back({Action::backward_input, 0, i});
    a.push_back({Action::backward_weight, 0, i});
  }
  return a;
}

class DualPipeBuilder {
 public:
  DualPipeBuilder(int ranks, int rank, int m) : second_half_(rank >= ranks / 2), half_chunks_(m / 2) {}

  void forward(int phase) {
    const int d = phase ^ second_half_;
    actions.push_back({Action::forward, int8_t(d), d * half_chunks_ + next_f_[d]++});
  }
  void backward(int phase, bool zero_bubble) {
    const int d = phase ^ second_half_;
    const Action w{Action::backward_weight, int8_t(d), d * half_chunks_ + next_b_[d]};
    actions.push_back({Action::backward_input, int8_t(d), d * half_chunks_ + next_b_[d]++});
    if (zero_bubble) deferred_.push_back(w);
    else actions.push_back(w);
  }
  void weight() {
    actions.push_back(deferred_.front());
    deferred_.pop_front();
  }
  // The paper overlaps these two; here they run back to back.
  void forward_backward(int forward_phase, int backward_phase) {
    forward(forward_phase);
    backward(backward_phase, false);
  }
  bool drained() const { return deferred_.empty(); }

  std::vector<Action> actions;

 private:
  int second_half_, half_chunks_;
  int next_f_[2] = {0, 0}, next_b_[2] = {0, 0};
  std::deque<Action> deferred_;
};

std::vector<Action> dualpipe(int ranks, int rank, int m) {
  const int half_ranks = ranks / 2, half_rank = std::min(rank, ranks - 1 - rank), half_chunks = m / 2;
  DualPipeBuilder b(ranks, rank, m);
  // 1: nF0
  for (int i = 0; i < (half_ranks - half_rank - 1) * 2; ++i) b.forward(0);
  // 2: nF0F1
  for (int i = 0; i < half_rank + 1; ++i) {
    b.forward(0);
    b.forward(1);
  }
  // 3: nB1W1F1 (zero bubble)
  for (int i = 0; i < half_ranks - half_rank - 1; ++i) {
    b.backward(1, true);
    b.weight();
    b.forward(1);
  }
  // 4 (main): nF0B1F1B0
  for (int i = 0; i < half_chunks - ranks + half_rank + 1; ++i) {
    b.forward_backward(0, 1);
    b.forward_backward(1, 0);
  }
  // 5: nB1F1B0
  for (int i = 0; i < half_ranks - half_rank - 1; ++i) {
    b.backward(1, false);
    b.forward_backward(1, 0);
  }
  // 6: nB1B0, the second half with zero bubble
  const int step6 = half_rank + 1;
  bool zero_bubble = false;
  for (int i = 0; i < step6; ++i) {
    if (i == step6 / 2 && half_rank % 2 == 1) zero_bubble = true;
    b.backward(1, zero_bubble);
    if (i == step6 / 2 && half_rank % 2 == 0) zero_bubble = true;
    b.backward(0, zero_bubble);
  }
  // 7: nWB0 (zero bubble)
  for (int i = 0; i < half_ranks - half_rank - 1; ++i) {
    b.weight();
    b.backward(0, true);
  }
  // 8: nW
  for (int i = 0; i < half_rank + 1; ++i) b.weight();
  check(b.drained(), "pp", "dualpipe schedule of rank ", rank, " left deferred weight passes (internal error)");
  return std::move(b.actions);
}

}  // namespace

std::vector<Action> build_schedule(Schedule s, int ranks, int rank, int m) {
  check(ranks >= 1 && rank >= 0 && rank < ranks, "pp", "rank ", rank, " is outside 0..", ranks - 1);
  check(m >= 1, "pp", "micro_batches = ", m, " but must be >= 1");
  if (s == Schedule::one_f_one_b) return one_f_one_b(ranks, rank, m);
  check(ranks % 2 == 0, "pp", "dualpipe needs an even number of ranks, got ", ranks);
  check(m % 2 == 0 && m >= 2 * ranks, "pp", "dualpipe needs an even micro_batches >= 2 x ranks = ", 2 * ranks,
        ", got ", m);
  return dualpipe(ranks, rank, m);
}

double bubble_formula(Schedule s, int ranks, int m, double f, double b, double w) {
  const double compute = double(m) * (f + b + w);
  double bubble = 0;
  if (s == Schedule::one_f_one_b) bubble = double(ranks - 1) * (f + b + w);
  else bubble = std::max(0.0, double(ranks / 2 - 1) * ((f + b) + b - 3 * w));
  return compute + bubble > 0 ? bubble / (compute + bubble) : 0;
}

}  // namespace sol::pp
