// What a plan must satisfy to run a model on a machine, and the default plan when none is given.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "model/accounting.h"
#include "sol/error.h"

namespace sol {

void validate_plan(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                   const Workload& w) {
  std::string what = p.origin.empty() ? "plan " + p.name : p.origin + " (plan " + p.name + ")";
  check(m.heads % p.tp == 0, what, "tp = ", p.tp, " must divide num_attention_heads = ",
        m.heads, " of ", m.name);
  check(m.kv_heads % p.tp == 0 || p.tp % m.kv_heads == 0, what, "tp = ", p.tp,
        " and num_key_value_heads = ", m.kv_heads, " of ", m.name, ": one must divide the other");
  check(m.intermediate % p.tp == 0, what, "tp = ", p.tp, " must divide intermediate_size = ",
        m.intermediate);
  check(p.pp <= m.layers, what, "pp = ", p.pp, " exceeds the ", m.layers, " layers of ", m.name);
  check(p.expert_load_imbalance == 1 || m.is_moe(), what, "expert_load_imbalance = ",
        p.expert_load_imbalance, " but ", m.name, " has no experts");
  check(p.ep == 1 || m.is_moe(), key_where(p.origin, p.key_lines, "ep"), "ep = ", p.ep, " but ",
        m.name, " has no experts");
  check(p.redundant_experts == 0 || m.is_moe(), key_where(p.origin, p.key_lines, "redundant_experts"),
        m.name, " has no experts");
  if (m.is_moe() && p.ep > 1) {
    int64_t placed = int64_t(model_detail::experts_placed(m, p));
    std::string hint = " (routed " + std::to_string(m.routed_experts) +
                       (p.shared_expert_as_routed ? " + shared " + std::to_string(m.shared_experts) : "") +
                       " + redundant_experts " + std::to_string(p.redundant_experts) +
                       "); set redundant_experts to fill the devices, as DeepSeek's deployments do";
    check(p.ep <= placed, key_where(p.origin, p.key_lines, "ep"), "ep = ", p.ep,
          " exceeds the ", placed, " experts placed", hint);
    check(placed % p.ep == 0, key_where(p.origin, p.key_lines, "ep"), "ep = ", p.ep,
          " does not divide the ", placed, " experts placed", hint);
  }
  check(!p.node_limited_routing || p.max_nodes_per_token > 0 || m.groups_per_token > 0, what,
        "node_limited_routing needs max_nodes_per_token (", m.name, " has no topk_group)");
  hw.flops(p.gemm_dtype);  // throws when the device cannot multiply in that dtype
  if (w.kind == Workload::Kind::inference) {
    check(!w.mtp_decode || m.mtp_layers > 0, key_where(w.origin, w.key_lines, "mtp_acceptance"),
          "decode.mtp_acceptance needs a model with MTP modules (num_nextn_predict_layers > 0); ",
          m.name, " has none");
    return;
  }
  check(!w.mtp || m.mtp_layers > 0, key_where(w.origin, w.key_lines, "mtp"), "mtp = true needs "
        "a model with MTP modules (num_nextn_predict_layers > 0); ", m.name, " has none");
  int64_t per_step = int64_t(p.dp) * p.micro_batches;
  check(w.global_batch % per_step == 0, what, "global_batch = ", w.global_batch,
        " sequences must split evenly into dp x micro_batches = ", per_step);
  check(p.micro_batches >= p.pp, what, "micro_batches = ", p.micro_batches,
        " must be at least pp = ", p.pp, " or the pipeline never fills");
  if (p.schedule == Schedule::dualpipe)
    check(p.pp % 2 == 0 && p.micro_batches % 2 == 0 && p.micro_batches >= 2 * p.pp, what,
          "dualpipe needs an even pp and an even micro_batches of at least 2 x pp (micro-batches "
          "enter from both ends), got pp = ", p.pp, ", micro_batches = ", p.micro_batches);
  check(p.pp > 1 || p.schedule == Schedule::one_f_one_b, what, "schedule ",
        schedule_name(p.schedule), " needs pp > 1");
}

namespace {
// Tensor parallelism stops at the KV heads (beyond, K and V are replicated) and the domain.
std::vector<int> tp_choices(const ModelConfig& m, int limit) {
  std::vector<int> out;
  for (int tp = 1; tp <= limit && tp <= m.kv_heads; tp *= 2)
    if (m.heads % tp == 0 && m.kv_heads % tp == 0 && m.intermediate % tp == 0) out.push_back(tp);
  return out;
}

int largest_power_of_two_dividing(int n, double cap) {
  int p = 1;
  while (n % (p * 2) == 0 && p * 2 <= cap) p *= 2;
  return p;
}

// Plans over `nodes` scale-up domains, cheapest first: inference spreads experts (EP) over
// every device with attention data-parallel, or splits a dense model by TP then PP; training
// adds pipeline stages before data-parallel replicas.
std::vector<ParallelPlan> candidates(const ModelConfig& m, const HardwareSpec& hw,
                                     const Workload& w, int nodes) {
  std::vector<ParallelPlan> out;
  int domain = hw.scale_up_size, devices = nodes * domain;
  ParallelPlan base;
  base.name = "auto";
  base.gemm_dtype = hw.flops_fp8 > 0 ? DType::f8e4m3 : DType::bf16;
  bool inference = w.kind == Workload::Kind::inference;
  for (int tp : tp_choices(m, domain)) {
    for (int pp = 1; pp <= nodes && pp <= m.layers; pp *= 2) {
      if (inference && m.is_moe() && pp > 1) break;
      ParallelPlan p = base;
      p.tp = tp;
      p.pp = pp;
      // Powers of two keep batches divisible; a 72-GPU domain then uses 64 of its devices.
      p.dp = largest_power_of_two_dividing(1 << 30, double(devices) / (tp * pp));
      if (m.is_moe())
        p.ep = largest_power_of_two_dividing(std::gcd(p.dp * tp, int(m.routed_experts)),
                                             double(m.routed_experts));
      if (inference) {
        p.weight_dtype = p.dispatch_dtype = p.gemm_dtype;
        p.overlap = devices > 1;
      } else {
        p.zero_stage = 1;
        p.recompute = Recompute::selective;
        p.micro_batches = static_cast<int>(std::max<int64_t>(1, w.global_batch / p.dp));
      }
      out.push_back(p);
    }
  }
  return out;
}
}  // namespace

ParallelPlan default_plan(const ModelConfig& m, const HardwareSpec& hw, const Workload& w) {
  // Without a scale-out link the machine is one scale-up domain.
  int max_nodes = hw.scale_out_bandwidth > 0 ? 1024 : 1;
  ParallelPlan closest;
  MemoryUse closest_mem;
  bool any = false;
  std::string first_invalid;
  for (int nodes = 1; nodes <= max_nodes; nodes *= 2) {
    for (const ParallelPlan& p : candidates(m, hw, w, nodes)) {
      try {
        validate_plan(m, hw, p, w);
      } catch (const Error& e) {
        if (first_invalid.empty()) first_invalid = e.what();
        continue;
      }
      MemoryUse mem = model_detail::memory_per_device(m, hw, p, w);
      if (mem.total() <= mem.capacity) return p;
      if (!any || mem.total() < closest_mem.total()) {
        closest = p;
        closest_mem = mem;
        any = true;
      }
    }
  }
  constexpr double GB = 1e9;
  std::string nearest =
      !any ? "no candidate plan was valid (the first: " + first_invalid + ")"
           : "the closest, dp " + std::to_string(closest.dp) + " tp " + std::to_string(closest.tp) +
                 " pp " + std::to_string(closest.pp) + " ep " + std::to_string(closest.ep) +
                 ", needs " + std::to_string(int(std::ceil(closest_mem.total() / GB))) +
                 " GB per device (params " + std::to_string(int(std::ceil(closest_mem.params / GB))) +
                 ", kv cache " + std::to_string(int(std::ceil(closest_mem.kv_cache / GB))) +
                 ", activations " + std::to_string(int(std::ceil(closest_mem.activations / GB))) +
                 ")";
  fail("model", "no default plan fits ", m.name, " on ", hw.name, " (", hw.memory_bytes / GB,
       " GB per device; tried up to ", max_nodes, " scale-up domains of ", hw.scale_up_size,
       " devices): ", nearest, "; write a plan file with more sharding or a smaller batch");
}

}  // namespace sol
