#pragma once
// Adds up op floors into a phase: compute-bound and memory-bound time on the device, and the
// time of each link (the two links run concurrently, so the busier one is the comm time).
#include <map>
#include <string>
#include <vector>

#include "model/accounting.h"

namespace sol::model_detail {

struct PhaseSum {
  double compute_s = 0, memory_s = 0, scale_up_s = 0, scale_out_s = 0;
  double scale_up_latency_s = 0, scale_out_latency_s = 0;  // included in the link times
  // Computation overlapped with communication runs this much slower: the communication
  // kernels hold some SMs (the efficiency layer's comm_sm_fraction; 1 without one).
  double sm_slowdown = 1;

  double device_s() const { return compute_s + memory_s; }
  // The device's time while the links work beside it.
  double overlapped_device_s() const { return comm_s() > 0 ? device_s() * sm_slowdown : device_s(); }
  double comm_s() const { return scale_up_s > scale_out_s ? scale_up_s : scale_out_s; }
  // Link time from bandwidth alone, as a bytes / bandwidth speed limit counts it.
  double comm_bandwidth_s() const;
  // Overlapped: the device and the links work at once; otherwise one after the other.
  double time_s(bool overlap) const;
  void add(const PhaseSum& other, double times = 1);
  std::string bottleneck() const;
};

// Sums ops (each repeated `count` times, scaled for the backward pass) into a PhaseSum and
// into per-op records of the named phase.
class PhaseAccumulator {
 public:
  PhaseAccumulator(const HardwareSpec& hw, std::string phase, PassKind pass = PassKind::forward)
      : hw_(hw), phase_(std::move(phase)), pass_(pass) {}
  PhaseSum add(const std::vector<OpCost>& ops, double count, double flops_scale = 1,
               double bytes_scale = 1);
  const std::vector<OpRecord>& records() const { return records_; }

 private:
  const HardwareSpec& hw_;
  std::string phase_;
  PassKind pass_;
  std::vector<OpRecord> records_;
  std::map<std::string, size_t> index_;
};

PhaseResult make_phase(const std::string& name, const PhaseSum& sum, double time_s,
                       double bubble_s = 0);

}  // namespace sol::model_detail
