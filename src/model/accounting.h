#pragma once
// Per-operator accounting shared by the step composers: what one transformer layer (or the
// embedding and head) costs one device for one micro-batch, forward.
#include <string>
#include <vector>

#include "sol/model.h"

namespace sol::model_detail {

enum class OpKind { gemm, attention, norm, elementwise, routing, embedding, comm };
std::string_view op_kind_name(OpKind k);
// Which pass an op runs in: the efficiency layer tells attention's backward from its forward,
// and decode's low-latency all-to-all from the throughput kernels of training and prefill.
enum class PassKind { forward, backward, decode };

struct OpCost {
  std::string name;
  OpKind kind = OpKind::gemm;
  double flops = 0;        // forward
  double bytes = 0;        // memory traffic, forward
  double link_bytes = 0;   // comm ops: bytes this device sends
  Link link = Link::none;
  double messages = 0;     // comm ops: latency-bound steps
  double saved_bytes = 0;  // activations kept for the backward pass
  double wgrad_flops = 0;  // the weight-gradient part of the backward (GEMMs)
  DType dtype = DType::bf16;
  double rows = 0;         // GEMMs: rows of the output (all groups)
  double groups = 0;       // GEMMs: weight matrices read (> 1: a grouped expert GEMM)
};

// One forward pass of one micro-batch through one device's share of a layer.
struct Pass {
  double tokens = 0;         // new tokens of this micro-batch on one tensor-parallel group
  double context = 0;        // keys each new token attends to, on average
  double kv_tokens = 0;      // KV entries read per layer (cached and new)
  bool absorbed = false;     // MLA decode: W_UK/W_UV absorbed, attention over the latent cache
  bool writes_kv = false;    // inference: new tokens' KV written to the cache
};

std::vector<OpCost> layer_ops(const ModelConfig& m, const HardwareSpec& hw,
                              const ParallelPlan& p, int64_t layer, const Pass& pass);
// Embedding lookup at the start, final norm + LM head (+ loss when training) at the end.
std::vector<OpCost> head_ops(const ModelConfig& m, const ParallelPlan& p, const Pass& pass,
                             bool training);
// DeepSeek-V3's MTP module: a projection of [h; embedding] and one more (MoE) layer.
std::vector<OpCost> mtp_ops(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                            const Pass& pass, bool training = true);

// Communication pieces (comm_ops.cc).
OpCost tensor_parallel_allreduce(const std::string& name, const HardwareSpec& hw,
                                 const ParallelPlan& p, double tokens, double hidden);
// Dispatch or combine of one MoE layer: records for the scale-out and the scale-up leg.
std::vector<OpCost> expert_all_to_all(const std::string& name, const ModelConfig& m,
                                      const HardwareSpec& hw, const ParallelPlan& p,
                                      double tokens, DType dtype);
OpCost pipeline_send(const HardwareSpec& hw, const ParallelPlan& p, double tokens, double hidden);
// Ring all-reduce (or reduce-scatter + all-gather) of `bytes` over `ranks` devices that sit
// `stride` devices apart.
OpCost gradient_sync(const std::string& name, const HardwareSpec& hw, double bytes, int ranks,
                     int stride);
Link link_for_group(const HardwareSpec& hw, int group_size);

// Floor of one op: compute, memory and link sides (links: bytes / bandwidth + latency).
struct OpTime {
  double compute_s = 0, memory_s = 0, link_s = 0;
  double latency_s = 0;  // the part of link_s that is per-message latency
  double floor_s() const;
  std::string bound() const;
};
// With an efficiency layer on the hardware, each side is divided by the efficiency of the
// op's work class, so floor_s() is the calibrated time.
OpTime op_time(const OpCost& op, const HardwareSpec& hw, double flops_scale = 1,
               double bytes_scale = 1, PassKind pass = PassKind::forward);
// The op's class in the efficiency layer (docs/model.md): gemm.<dtype>.<decode|mid|large>,
// grouped_gemm.<dtype>.<...> (by rows per group), attention.fwd|bwd, mla.decode.<bound> (attention.decode.<bound>
// without MLA),
// memory, ep.<dispatch|combine>.<link>[.decode], allreduce.<link>, pp.p2p. `floor` decides
// the bound of MLA decode.
std::string work_class(const OpCost& op, PassKind pass, const OpTime& floor);

// Parameters one device holds (counts, not bytes).
struct ParamShare {
  double dense = 0;   // replicated over dp (attention, dense MLP, shared experts, embeddings)
  double expert = 0;  // routed experts, replicated over dp x tp / ep
};
// `mtp`: the last stage also holds the model's MTP modules (training them).
ParamShare params_per_device(const ModelConfig& m, const ParallelPlan& p, bool mtp = false);
int64_t layers_per_stage(const ModelConfig& m, const ParallelPlan& p);
// The experts each token visits and the experts the EP group holds.
double experts_per_token(const ModelConfig& m, const ParallelPlan& p);
double experts_placed(const ModelConfig& m, const ParallelPlan& p);

MemoryUse memory_per_device(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                            const Workload& w);
// Throws sol::Error naming each part when the memory exceeds the device's capacity.
void check_fits(const MemoryUse& mem, const HardwareSpec& hw, const ParallelPlan& p);

// Micro-batch passes of a workload (tokens per tensor-parallel group).
Pass training_pass(const ParallelPlan& p, const Workload& w);
Pass prefill_pass(const Workload& w, int micro_batches);
// Decode: with MTP drafting, each sequence brings 1 + depth query positions over one cache.
Pass decode_pass(const Workload& w, int micro_batches, int64_t draft_depth = 0);

}  // namespace sol::model_detail
