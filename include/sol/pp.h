#pragma once
// sol::pp — pipeline parallelism: fixed-shape activation/gradient transfers between stages
// and a schedule runner over user-provided stage callables.
//
// One rank runs one pipeline stage (1F1B) or two (DualPipe: stage r of the pipeline that
// enters at rank 0 and stage P-1-r of the one that enters at rank P-1; the model's weights are
// held twice, as in the paper). Every boundary carries a tensor of one fixed shape and dtype.
//
// Schedules are lists of actions per rank, built the same way on every rank, so each rank
// knows the order in which each neighbour sends to it: receives are posted in that order into
// preallocated slots (two per neighbour, more only where the schedule needs them: the count is
// computed from the schedule, once, at construction), sends go out of preallocated slots
// asynchronously, and nothing on the hot path allocates. Compute is sequential on a rank, so
// DualPipe's overlapped "F&B" pair runs as F then B back to back with their transfers in
// flight together (docs/perf/cp-pp-engram.md says what that keeps of the paper's schedule).
//
// Every wait has the comm core's deadline (SOL_COMM_TIMEOUT_S) and throws sol::CommError
// naming the stage, the micro-batch and the peer.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sol/comm.h"
#include "sol/dtype.h"
#include "sol/tensor.h"

namespace sol::pp {

enum class Schedule { one_f_one_b, dualpipe };
std::string_view schedule_name(Schedule s);
Schedule parse_schedule(std::string_view name);  // "1f1b" | "dualpipe"; throws sol::Error

// One step of a rank's schedule.
struct Action {
  enum Kind : uint8_t { forward, backward_input, backward_weight } kind;
  int8_t direction = 0;   // 0: enters at rank 0; 1 (DualPipe): enters at rank P-1
  int micro_batch = 0;    // global id: direction 1 holds ids M/2 .. M-1
};

// The action list of `rank` (P ranks, M micro-batches). 1F1B: warm-up forwards, then
// one-forward-one-backward, then the remaining backwards; each backward_input is followed by
// its backward_weight. DualPipe (P even, M even, M >= 2P): the eight steps of DeepSeek's
// DualPipe, with weight passes deferred where the paper's zero-bubble parts defer them.
std::vector<Action> build_schedule(Schedule s, int ranks, int rank, int micro_batches);

// Idle fraction of a rank's step the schedule predicts, with F, B (input) and W (weight)
// times per micro-batch and stage (DualPipe: "F&B" = F + B since compute is sequential here):
//   1F1B:     (P-1)(F+B+W) / ((M+P-1)(F+B+W))            = (P-1)/(M+P-1)
//   DualPipe: (P/2-1)(F&B + B - 3W) / (M(F+B+W) + that)  (the paper's bubble, M per rank: each
//             rank runs M/2 micro-batches in each direction over two stages of half the depth)
double bubble_formula(Schedule s, int ranks, int micro_batches, double f, double b, double w);

// Where a stage callable is called from.
struct StageCall {
  int stage = 0;          // pipeline stage whose weights to use (0 .. P-1)
  int direction = 0;      // which copy of the weights (DualPipe); 0 for 1F1B
  int micro_batch = 0;
  bool first = false;     // first stage: forward's x is empty (load the micro-batch)
  bool last = false;      // last stage: forward's y and backward's dy are empty (loss here)
};

struct StageFns {
  // Empty tensors have shape [0] and no data.
  // x: the activation received (empty on the first stage); y: where to write the output
  // (empty on the last stage, which computes its loss instead). x is valid during the call
  // only: keep what backward needs.
  std::function<void(const StageCall&, const Tensor& x, const Tensor& y)> forward;
  // dy: gradient of the output (empty on the last stage); dx: where to write the gradient of
  // the input (empty on the first stage).
  std::function<void(const StageCall&, const Tensor& dy, const Tensor& dx)> backward_input;
  // Weight gradients of that micro-batch; may be empty when backward_input does it all.
  std::function<void(const StageCall&)> backward_weight;
};

struct PipelineOptions {
  Schedule schedule = Schedule::one_f_one_b;
  int micro_batches = 1;
  std::vector<int64_t> boundary_shape;  // the tensor every stage boundary carries
  DType dtype = DType::f32;
};

// What one run measured on this rank.
struct PipelineStats {
  double wall_s = 0;                 // the whole step
  double forward_s = 0, backward_input_s = 0, backward_weight_s = 0;  // inside the callables
  double bubble_measured = 0;        // 1 - compute / wall (waiting and transfers count as bubble)
  double bubble_formula = 0;         // bubble_formula() with this rank's mean F, B, W
  int recv_slots = 0;                // receive slots per neighbour the schedule needed
};

// Activations and gradients between adjacent ranks of `group` (rank r talks to r-1 and r+1),
// fixed shape, preallocated slots; and the schedule runner. Construction is local (no
// communication); every rank of the group builds one with the same options.
class Pipeline {
 public:
  Pipeline(const comm::Group& group, const PipelineOptions& options);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // One training step over all micro-batches. Collective over the group.
  PipelineStats run(const StageFns& fns);

  const std::vector<Action>& actions() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sol::pp
