// sol::predict: validate the plan, check the memory, compose the step.
#include "model/accounting.h"
#include "model/steps.h"
#include "sol/error.h"

namespace sol {

namespace {
// The matrix peak a GEMM dtype runs at, by the name HardwareSpec gives it (f16 at bf16's).
const char* peak_name(DType t) {
  switch (t) {
    case DType::f8e4m3: case DType::f8e5m2: return "fp8";
    case DType::f32: return "f32";
    default: return "bf16";
  }
}
}  // namespace

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
  out.mfu_peak = peak_name(p.gemm_dtype);
  out.memory = model_detail::memory_per_device(m, hw, p, w);
  model_detail::check_fits(out.memory, hw, p);
  if (w.kind == Workload::Kind::training)
    model_detail::predict_training(m, hw, p, w, out);
  else
    model_detail::predict_inference(m, hw, p, w, out);
  return out;
}

namespace {
// Matrix FLOPs (GEMMs and attention, as MFU counts them) of one token's forward on one device.
double matrix_flops(const ModelConfig& m, const model_detail::Pass& pass, bool training,
                    bool mtp) {
  ParallelPlan one;
  HardwareSpec none;
  std::vector<model_detail::OpCost> ops = model_detail::head_ops(m, one, pass, training);
  for (int64_t l = 0; l < m.layers; ++l)
    for (auto& op : model_detail::layer_ops(m, none, one, l, pass)) ops.push_back(op);
  if (mtp)
    for (int64_t i = 0; i < m.mtp_layers; ++i)
      for (auto& op : model_detail::mtp_ops(m, none, one, pass, training)) ops.push_back(op);
  double flops = 0;
  for (const auto& op : ops)
    if (op.kind == model_detail::OpKind::gemm || op.kind == model_detail::OpKind::attention)
      flops += op.flops;
  return flops;
}
}  // namespace

double training_flops_per_token(const ModelConfig& m, int64_t seq_len, bool mtp, bool causal) {
  model_detail::Pass pass;
  pass.tokens = 1;
  pass.context = causal ? (seq_len + 1) / 2.0 : double(seq_len);
  pass.kv_tokens = 1;
  // backward: input gradients + weight gradients, each as large as the forward
  return 3 * matrix_flops(m, pass, true, mtp);
}

double decode_flops_per_token(const ModelConfig& m, int64_t context) {
  model_detail::Pass pass;
  pass.tokens = 1;
  pass.context = double(context);
  pass.kv_tokens = double(context);
  pass.absorbed = true;
  return matrix_flops(m, pass, false, false);
}

}  // namespace sol
