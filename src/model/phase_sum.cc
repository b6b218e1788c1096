#include "model/phase_sum.h"

#include <algorithm>

namespace sol::model_detail {

double PhaseSum::time_s(bool overlap) const {
  return overlap ? std::max(overlapped_device_s(), comm_s()) : device_s() + comm_s();
}

double PhaseSum::comm_bandwidth_s() const {
  return std::max(scale_up_s - scale_up_latency_s, scale_out_s - scale_out_latency_s);
}

void PhaseSum::add(const PhaseSum& other, double times) {
  compute_s += other.compute_s * times;
  memory_s += other.memory_s * times;
  scale_up_s += other.scale_up_s * times;
  scale_out_s += other.scale_out_s * times;
  scale_up_latency_s += other.scale_up_latency_s * times;
  scale_out_latency_s += other.scale_out_latency_s * times;
  sm_slowdown = std::max(sm_slowdown, other.sm_slowdown);
}

std::string PhaseSum::bottleneck() const {
  // The device's compute and memory time add up (op by op, one of the two bounds it); the
  // links run beside the device, so a link is the bottleneck only when it outlasts the device.
  if (device_s() == 0 && comm_s() == 0) return "none";
  if (comm_s() > device_s()) return scale_out_s >= scale_up_s ? "scale_out" : "scale_up";
  return compute_s >= memory_s ? "compute" : "memory";
}

PhaseSum PhaseAccumulator::add(const std::vector<OpCost>& ops, double count, double flops_scale,
                               double bytes_scale) {
  PhaseSum sum;
  if (hw_.efficiency) sum.sm_slowdown = 1 / (1 - hw_.efficiency->comm_sm_fraction);
  for (const OpCost& op : ops) {
    OpTime t = op_time(op, hw_, flops_scale, bytes_scale, pass_);
    double floor = t.floor_s() * count;
    if (op.kind == OpKind::comm) {
      bool up = op.link == Link::scale_up;
      (up ? sum.scale_up_s : sum.scale_out_s) += floor;
      (up ? sum.scale_up_latency_s : sum.scale_out_latency_s) += t.latency_s * count;
    } else if (t.compute_s >= t.memory_s) {
      sum.compute_s += floor;
    } else {
      sum.memory_s += floor;
    }
    auto [it, fresh] = index_.try_emplace(op.name, records_.size());
    if (fresh) {
      OpRecord r;
      r.phase = phase_;
      r.name = op.name;
      r.kind = std::string(op_kind_name(op.kind));
      r.link = op.link;
      r.bound = t.bound();
      r.work = work_class(op, pass_, t);
      records_.push_back(r);
    }
    OpRecord& r = records_[it->second];
    r.count += count;
    r.flops += op.flops * flops_scale * count;
    r.bytes += op.bytes * bytes_scale * count;
    r.link_bytes += op.link_bytes * bytes_scale * count;
    r.floor_s += floor;
  }
  return sum;
}

PhaseResult make_phase(const std::string& name, const PhaseSum& sum, double time_s,
                       double bubble_s) {
  PhaseResult r;
  r.name = name;
  r.time_s = time_s;
  r.compute_s = sum.compute_s;
  r.memory_s = sum.memory_s;
  r.comm_s = sum.comm_s();
  r.exposed_comm_s = std::max(0.0, time_s - bubble_s - sum.device_s());
  r.bubble_s = bubble_s;
  r.bottleneck = bubble_s > std::max(sum.device_s(), sum.comm_s()) ? "bubble" : sum.bottleneck();
  return r;
}

}  // namespace sol::model_detail
