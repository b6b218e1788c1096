// Bytes each device puts on its links. Groups are laid out densely: a tensor- or expert-parallel
// group of g devices fills min(g, scale_up_size) devices of each scale-up domain it touches.
#include <algorithm>
#include <cmath>

#include "model/accounting.h"
#include "sol/error.h"

namespace sol::model_detail {

Link link_for_group(const HardwareSpec& hw, int group_size) {
  if (group_size <= 1) return Link::none;
  return group_size <= hw.scale_up_size ? Link::scale_up : Link::scale_out;
}

namespace {
OpCost comm(const std::string& name, Link link, double bytes, double messages) {
  OpCost op{name, OpKind::comm};
  op.link = link;
  op.link_bytes = bytes;
  op.messages = messages;
  return op;
}
}  // namespace

OpCost tensor_parallel_allreduce(const std::string& name, const HardwareSpec& hw,
                                 const ParallelPlan& p, double tokens, double hidden) {
  // Ring all-reduce (or reduce-scatter + all-gather under sequence parallelism): each device
  // sends 2 (n-1)/n of the tensor.
  double n = p.tp, bytes = tokens * hidden * 2;
  return comm(name, link_for_group(hw, p.tp), 2 * (n - 1) / n * bytes, 2 * (n - 1));
}

double experts_per_token(const ModelConfig& m, const ParallelPlan& p) {
  return double(m.experts_per_token) + (p.shared_expert_as_routed ? m.shared_experts : 0);
}

double experts_placed(const ModelConfig& m, const ParallelPlan& p) {
  return double(m.routed_experts) + (p.shared_expert_as_routed ? m.shared_experts : 0) +
         p.redundant_experts;
}

std::vector<OpCost> expert_all_to_all(const std::string& name, const ModelConfig& m,
                                      const HardwareSpec& hw, const ParallelPlan& p,
                                      double tokens, DType dtype) {
  if (p.ep <= 1) return {};
  double ep = p.ep, per_domain = std::min(ep, double(hw.scale_up_size));
  double domains = std::ceil(ep / per_domain), k = experts_per_token(m, p);
  double token_bytes = tokens * m.hidden * double(dtype_size(dtype));
  double out_copies = 0, up_copies = 0;
  if (domains <= 1) {
    up_copies = k * (ep - 1) / ep;  // each expert sits on another device with prob (ep-1)/ep
  } else if (p.node_limited_routing) {
    // A token crosses the scale-out network once per target node (at most M nodes, the home
    // node among them with probability M / domains), then is forwarded inside the node.
    double limit = p.max_nodes_per_token > 0 ? p.max_nodes_per_token : m.groups_per_token;
    double nodes = std::min(limit, domains);
    out_copies = nodes * (domains - 1) / domains;
    up_copies = k * (per_domain - 1) / per_domain;
  } else {
    out_copies = k * (ep - per_domain) / ep;
    up_copies = k * (per_domain - 1) / ep;
  }
  std::vector<OpCost> ops;
  if (out_copies > 0)
    ops.push_back(comm(name + ".scale_out", Link::scale_out, out_copies * token_bytes, 1));
  if (up_copies > 0)
    ops.push_back(comm(name + ".scale_up", Link::scale_up, up_copies * token_bytes, 1));
  return ops;
}

OpCost pipeline_send(const HardwareSpec& hw, const ParallelPlan& p, double tokens,
                     double hidden) {
  // Consecutive stages sit on different scale-up domains once a stage's tp x dp fills one.
  Link link = p.devices() <= hw.scale_up_size ? Link::scale_up : Link::scale_out;
  return comm("pp.send_activations", p.pp > 1 ? link : Link::none, tokens * hidden * 2, 1);
}

OpCost gradient_sync(const std::string& name, const HardwareSpec& hw, double bytes, int ranks,
                     int stride) {
  // Replicas of one shard sit `stride` devices apart (tensor- or expert-parallel peers fill
  // the scale-up domain first), so the group stays inside a domain only when it fits there.
  double n = ranks;
  Link link = ranks <= 1 ? Link::none
              : int64_t(ranks) * stride <= hw.scale_up_size ? Link::scale_up : Link::scale_out;
  return comm(name, link, 2 * (n - 1) / n * bytes, 2 * (n - 1));
}

double OpTime::floor_s() const { return std::max({compute_s, memory_s, link_s}); }

std::string OpTime::bound() const {
  if (link_s > 0 && link_s >= compute_s && link_s >= memory_s) return "link";
  return compute_s >= memory_s ? "compute" : "memory";
}

namespace {
OpTime floor_time(const OpCost& op, const HardwareSpec& hw, double flops_scale,
                  double bytes_scale) {
  OpTime t;
  if (op.kind == OpKind::comm) {
    if (op.link == Link::none || op.link_bytes == 0) return t;
    bool up = op.link == Link::scale_up;
    double bw = up ? hw.scale_up_bandwidth : hw.scale_out_bandwidth;
    check(bw > 0, "model", op.name, " needs the ", link_name(op.link), " link but hardware ",
          hw.name, " has none (bandwidth 0)");
    double latency = up ? hw.scale_up_latency_s : hw.scale_out_latency_s;
    t.latency_s = op.messages * latency;
    t.link_s = bytes_scale * op.link_bytes / bw + t.latency_s;
    return t;
  }
  double flops = op.flops * flops_scale;
  if (flops > 0) t.compute_s = flops / hw.flops(op.dtype);
  t.memory_s = op.bytes * bytes_scale / hw.memory_bandwidth;
  return t;
}
}  // namespace

OpTime op_time(const OpCost& op, const HardwareSpec& hw, double flops_scale, double bytes_scale,
               PassKind pass) {
  OpTime t = floor_time(op, hw, flops_scale, bytes_scale);
  if (!hw.efficiency) return t;
  double slow = 1 / hw.efficiency->fraction(work_class(op, pass, t));
  t.compute_s *= slow;
  t.memory_s *= slow;
  t.link_s *= slow;
  t.latency_s *= slow;
  return t;
}

}  // namespace sol::model_detail

namespace sol {

std::string_view link_name(Link l) {
  switch (l) {
    case Link::none: return "none";
    case Link::scale_up: return "scale_up";
    case Link::scale_out: return "scale_out";
  }
  return "?";
}

}  // namespace sol
