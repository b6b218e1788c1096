#pragma once
// When a kernel record is no evidence of its kernel: the rules `sol model loop` and
// `sol model calibrate` both drop samples by (docs/model.md).
#include <string>

namespace sol::model_detail {

// A paired ceiling that moved more than this between its measurements before and after the op
// makes the record's floor uncertain (docs/ARCHITECTURE.md, decision 15). Twice the ~10% spread
// of repeated runs on a quiet machine: noise alone does not cross it.
constexpr double kCeilingMovedLimit = 1.2;
// A record whose median run took this much longer than its fastest was slowed in most of its
// runs by something other than its kernel (the scheduler, a neighbour's traffic): its time is the
// machine's state. The same twice-the-spread bound as the ceiling's.
constexpr double kScheduledOutRatio = 1.2;

// Why a record is no evidence of its kernel by the two rules above, "" when it is: time_s is its
// median run, min_s its fastest (0: not recorded), ceiling_moved its paired ceiling's factor.
inline std::string why_not_evidence(double time_s, double min_s, double ceiling_moved) {
  if (ceiling_moved > kCeilingMovedLimit)
    return "its paired ceiling moved " + std::to_string(ceiling_moved) + "x during the run";
  if (min_s > 0 && time_s > kScheduledOutRatio * min_s)
    return "cut by the scheduler (median " + std::to_string(time_s / min_s) + "x the fastest run)";
  return "";
}

}  // namespace sol::model_detail
