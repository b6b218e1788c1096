// A training step on the slowest pipeline stage: micro-batches of forward and backward chunks,
// the schedule's bubble, the data-parallel gradient sync, and the optimizer step.
#include <algorithm>

#include "model/phase_sum.h"
#include "model/steps.h"

namespace sol::model_detail {

namespace {
constexpr double kAdamBytesPerParam = 4 * 4 + 4 * 3 + 2;  // read master, m, v, grad; write
                                                          // master, m, v and the bf16 weight
constexpr double kAdamFlopsPerParam = 12;

// One forward chunk of the slowest stage: its layers (MoE ones last), the head, MTP.
std::vector<OpCost> stage_forward_ops(const ModelConfig& m, const HardwareSpec& hw,
                                      const ParallelPlan& p, const Workload& w, const Pass& pass) {
  std::vector<OpCost> ops;
  int64_t stage = layers_per_stage(m, p);
  for (int64_t l = m.layers - stage; l < m.layers; ++l)
    for (OpCost& op : layer_ops(m, hw, p, l, pass)) ops.push_back(op);
  for (OpCost& op : head_ops(m, p, pass, true)) ops.push_back(op);
  if (w.mtp)
    for (int64_t i = 0; i < m.mtp_layers; ++i)
      for (OpCost& op : mtp_ops(m, hw, p, pass)) ops.push_back(op);
  if (p.pp > 1) ops.push_back(pipeline_send(hw, p, pass.tokens, m.hidden));
  return ops;
}
}  // namespace

void predict_training(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                      const Workload& w, Prediction& out) {
  Pass pass = training_pass(p, w);
  std::vector<OpCost> ops = stage_forward_ops(m, hw, p, w, pass), compute_ops, comm_ops;
  for (const OpCost& op : ops) (op.kind == OpKind::comm ? comm_ops : compute_ops).push_back(op);
  double mb = p.micro_batches;

  PhaseAccumulator fwd(hw, "forward"), bwd(hw, "backward", PassKind::backward);
  PhaseSum forward = fwd.add(ops, mb);
  // The backward pass does twice the forward's work (input and weight gradients) and moves
  // the same bytes over the links (gradients of dispatch, combine, all-reduce, sends).
  // Recomputation adds forward work: all of it (full) or the ops whose inputs were dropped.
  double redo = p.recompute == Recompute::full ? 1 : 0;
  std::vector<OpCost> gemms, streams;
  for (const OpCost& op : compute_ops)
    (op.kind == OpKind::gemm ? gemms : streams).push_back(op);
  double stream_redo = p.recompute == Recompute::none ? 0 : 1;
  PhaseSum backward = bwd.add(gemms, mb, 2 + redo, 2 + redo);
  backward.add(bwd.add(streams, mb, 2 + stream_redo, 2 + stream_redo));
  backward.add(bwd.add(comm_ops, mb, 1, 1 + redo));
  double weight_grad = 0;
  for (const OpCost& op : compute_ops)
    if (op.kind == OpKind::gemm) weight_grad += op_time(op, hw).floor_s();

  double f_dev = forward.device_s() / mb, f_comm = forward.comm_s() / mb;
  double b_dev = backward.device_s() / mb, b_comm = backward.comm_s() / mb;
  if (p.overlap) {  // communication kernels overlapping the computation hold some of its SMs
    f_dev = forward.overlapped_device_s() / mb;
    b_dev = backward.overlapped_device_s() / mb;
  }
  double f = p.overlap ? std::max(f_dev, f_comm) : f_dev + f_comm;
  double b = p.overlap ? std::max(b_dev, b_comm) : b_dev + b_comm;
  double fb = p.overlap ? std::max(f_dev + b_dev, f_comm + b_comm) : f + b;
  double chunk = p.schedule == Schedule::dualpipe ? fb : f + b;
  PipelineCost pipe = pipeline_cost(p.schedule, p.pp, p.micro_batches, f, b, weight_grad, fb);
  // The schedule run pass by pass decides the step; the closed form is reported beside it.
  // Its bubble phase is what the schedule adds to micro_batches steady-state chunks.
  PipelineSimulation sim = simulate_pipeline(p.schedule, p.pp, p.micro_batches, f, b,
                                             std::min(weight_grad, b), fb);
  double bubble_s = std::max(0.0, sim.makespan_s - mb * chunk);
  if (p.pp > 1)
    out.pipeline = {std::string(schedule_name(p.schedule)), f, b, weight_grad, fb, sim.bubble_s,
                    pipe.bubble_s, sim.makespan_s, sim.peak_inflight, std::move(sim.stages)};

  PhaseSum both = forward;
  both.add(backward);
  out.phases.push_back(make_phase("forward+backward", both, mb * chunk));
  PhaseResult bubble = make_phase("pipeline bubble", PhaseSum{}, bubble_s, bubble_s);
  bubble.bottleneck = "bubble";
  out.phases.push_back(bubble);

  ParamShare share = params_per_device(m, p, w.mtp);
  PhaseAccumulator sync_acc(hw, "gradient sync");
  double copies = pipe.param_copies;
  std::vector<OpCost> sync = {
      gradient_sync("dp.grad_sync_dense", hw, copies * share.dense * 4, p.dp, p.tp),
      gradient_sync("dp.grad_sync_experts", hw, copies * share.expert * 4, p.dp * p.tp / p.ep,
                    p.ep)};
  PhaseSum sync_sum = sync_acc.add(sync, 1);
  // Overlapped plans reduce gradients as the backward produces them.
  double sync_exposed = p.overlap ? std::max(0.0, sync_sum.comm_s() - mb * b_dev) : sync_sum.comm_s();
  out.phases.push_back(make_phase("gradient sync", sync_sum, sync_exposed));

  double shard = p.zero_stage >= 1 ? 1.0 : 0.0;
  double local_params = copies * (share.dense / (shard ? p.dp : 1) +
                                  share.expert / (shard ? double(p.dp) * p.tp / p.ep : 1));
  OpCost adam{"optimizer.adam", OpKind::elementwise};
  adam.bytes = local_params * kAdamBytesPerParam;
  adam.flops = local_params * kAdamFlopsPerParam;
  adam.dtype = DType::f32;
  PhaseAccumulator opt_acc(hw, "optimizer");
  PhaseSum opt = opt_acc.add({adam}, 1);
  out.phases.push_back(make_phase("optimizer", opt, opt.time_s(false)));

  for (const auto* acc : {&fwd, &bwd, &sync_acc, &opt_acc})
    out.ops.insert(out.ops.end(), acc->records().begin(), acc->records().end());
  out.step_s = 0;
  for (const PhaseResult& ph : out.phases) out.step_s += ph.time_s;
  double tokens = double(w.global_batch) * w.seq_len;
  out.tokens_per_s = tokens / out.step_s;
  out.tokens_per_s_per_device = out.tokens_per_s / p.devices();
  out.model_flops_per_token = training_flops_per_token(m, w.seq_len, w.mtp);
  out.mfu = out.model_flops_per_token * out.tokens_per_s_per_device / hw.flops(p.gemm_dtype);

  Prediction::Training& t = out.training;
  t.forward_s = f;
  t.backward_weight_s = std::min(weight_grad, b);
  t.backward_input_s = b - t.backward_weight_s;
  t.body_s = mb * chunk;
  t.bubble_s = bubble_s;
  t.grad_sync_s = sync_exposed;
  t.optimizer_s = opt.time_s(false);
  t.tokens_per_day_per_device = out.tokens_per_s_per_device * 86400;
  double causal = out.model_flops_per_token * out.tokens_per_s_per_device;
  double non_causal =
      training_flops_per_token(m, w.seq_len, w.mtp, false) * out.tokens_per_s_per_device;
  if (hw.flops_bf16 > 0) {
    t.mfu_bf16_causal = causal / hw.flops_bf16;
    t.mfu_bf16_non_causal = non_causal / hw.flops_bf16;
  }
  if (hw.flops_fp8 > 0) {
    t.mfu_fp8_causal = causal / hw.flops_fp8;
    t.mfu_fp8_non_causal = non_causal / hw.flops_fp8;
  }
}

}  // namespace sol::model_detail
