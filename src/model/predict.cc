// sol::predict: validate the plan, check the memory, compose the step.
#include "model/accounting.h"
#include "model/steps.h"
#include "sol/error.h"

namespace sol {

Prediction predict(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                   const Workload& w) {
  validate_plan(m, hw, p, w);
  Prediction out;
  out.model = m.name;
  out.hardware = hw.name;
  out.plan = p.name;
  out.workload = w.name;
  out.kind = w.kind;
  out.devices = p.devices();
  out.memory = model_detail::memory_per_device(m, hw, p, w);
  model_detail::check_fits(out.memory, hw, p);
  if (w.kind == Workload::Kind::training)
    model_detail::predict_training(m, hw, p, w, out);
  else
    model_detail::predict_inference(m, hw, p, w, out);
  return out;
}

double training_flops_per_token(const ModelConfig& m, int64_t seq_len, bool mtp) {
  // One token on one device (no parallelism); matrix work only, as MFU counts it.
  ParallelPlan one;
  HardwareSpec none;
  model_detail::Pass pass;
  pass.tokens = 1;
  pass.context = (seq_len + 1) / 2.0;
  pass.kv_tokens = 1;
  std::vector<model_detail::OpCost> ops = model_detail::head_ops(m, one, pass, true);
  for (int64_t l = 0; l < m.layers; ++l)
    for (auto& op : model_detail::layer_ops(m, none, one, l, pass)) ops.push_back(op);
  if (mtp)
    for (int64_t i = 0; i < m.mtp_layers; ++i)
      for (auto& op : model_detail::mtp_ops(m, none, one, pass)) ops.push_back(op);
  double flops = 0;
  for (const auto& op : ops)
    if (op.kind == model_detail::OpKind::gemm || op.kind == model_detail::OpKind::attention)
      flops += op.flops;
  return 3 * flops;  // backward: input gradients + weight gradients, each as large as forward
}

}  // namespace sol
