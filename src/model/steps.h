#pragma once
// The step composers behind sol::predict.
#include "sol/model.h"

namespace sol::model_detail {

void predict_training(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                      const Workload& w, Prediction& out);
void predict_inference(const ModelConfig& m, const HardwareSpec& hw, const ParallelPlan& p,
                       const Workload& w, Prediction& out);

}  // namespace sol::model_detail
